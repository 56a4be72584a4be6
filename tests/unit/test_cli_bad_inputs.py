"""Bad input to `kfdist` ends in one `kfdist: invalid input:` line (exit 2) naming the bad
value, never a traceback, and nothing is written over: `train --dataset` that is not a kfdist
dataset, `sample-data --out` that cannot be a writable directory."""

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


def _one_line(proc, value):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("kfdist:")]
    assert len(lines) == 1 and lines[0].startswith("kfdist: invalid input:"), proc.stderr
    assert value in lines[0]


@pytest.mark.parametrize("out", ["file.txt", "file.txt/sub", "/proc/kfdist-none/sub"])
def test_sample_data_refuses_an_out_that_cannot_be_a_directory(tmp_path, out):
    """A regular file, a path under one, or a path under /proc (not writable, even for root)."""
    (tmp_path / "file.txt").write_bytes(b"keep me")
    proc = subprocess.run([sys.executable, "-m", "kfdist", "sample-data", "tabular", "--out", out],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    _one_line(proc, repr(out))
    assert (tmp_path / "file.txt").read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]


@pytest.mark.parametrize("command", [["train", "--epochs", "1"], ["run", "tabular"]])
@pytest.mark.parametrize("output", ["file.txt", "file.txt/sub"])
def test_run_and_train_refuse_an_output_under_a_file(tmp_path, command, output):
    (tmp_path / "file.txt").write_bytes(b"keep me")
    proc = subprocess.run([sys.executable, "-m", "kfdist", *command, "--output", output],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    _one_line(proc, repr(output))
    assert (tmp_path / "file.txt").read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]
