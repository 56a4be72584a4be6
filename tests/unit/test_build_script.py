"""containers/build.sh refuses bad arguments in one line naming them, before it builds anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "containers" / "build.sh"


@pytest.mark.parametrize("args, message", [
    (["--registry", "GHCR.io/Org"], "invalid --registry 'GHCR.io/Org'"),
    (["--registry"], "--registry needs a value"),
    (["--tag", ".1"], "invalid --tag '.1'"),
    (["--tag", "a" * 129], "invalid --tag"),
    (["--pull-everything"], "unknown option '--pull-everything'; valid: --registry R"),
    (["runtime", "cuda"], "unknown image 'cuda'; valid: runtime horovod beam-worker training-gpu"),
    (["--engine", "buildkitd", "runtime"], "invalid --engine 'buildkitd'; valid: docker, podman"),
    (["--engine"], "--engine needs a value"),
])
def test_bad_arguments_fail_in_one_line_naming_them(args, message):
    result = subprocess.run(["bash", str(BUILD), *args], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_help_lists_every_option():
    result = subprocess.run(["bash", str(BUILD), "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    for option in ("--registry R", "--tag T", "--push", "--engine"):
        assert option in result.stdout
