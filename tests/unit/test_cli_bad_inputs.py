"""`kfdist train --dataset` refuses a directory that is not a kfdist dataset with one
`kfdist: invalid input:` line (exit 2) naming it, never a traceback, and writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CASES = {
    "missing": None,
    "not_json": "{not json",
    "not_an_object": "[1, 2]",
    "lacks_fields": '{"format_version": "kfdist.dataset/v2"}',
}


def _dataset(tmp_path, text):
    root = tmp_path / "data"
    root.mkdir()
    if text is not None:
        (root / "metadata.json").write_text(text)
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_metadata_names_the_bad_dataset(tmp_path, case):
    from kfdist.components.common.dataset_spec import load_metadata
    from kfdist.components.common.errors import InvalidInputError

    root = _dataset(tmp_path, CASES[case])
    with pytest.raises(InvalidInputError, match="is not a kfdist dataset"):
        load_metadata(str(root))


@pytest.mark.parametrize("case", sorted(CASES))
def test_train_refuses_a_bad_dataset_in_one_line(tmp_path, case):
    root = _dataset(tmp_path, CASES[case])
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "kfdist", "train", "--dataset", str(root),
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("kfdist:")]
    assert len(lines) == 1 and lines[0].startswith("kfdist: invalid input:"), proc.stderr
    assert str(root) in lines[0]
    assert not os.path.exists(out)
