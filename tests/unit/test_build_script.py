"""containers/build.sh and install-horovod.sh refuse bad arguments in one line naming them, before
they build anything."""

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
    (["--horovod-wheel-dir"], "--horovod-wheel-dir needs a directory"),
    (["--horovod-wheel-dir", "/nonexistent", "horovod"],
     "--horovod-wheel-dir '/nonexistent' holds no horovod-*.whl and tensorflow-version"),
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
    for option in ("--registry R", "--tag T", "--push", "--engine", "--horovod-wheel-dir DIR",
                   "IMAGE"):
        assert option in result.stdout


INSTALL_HOROVOD = BUILD.parent / "horovod" / "install-horovod.sh"


@pytest.mark.parametrize("args, message", [
    (["--prebuilt", "/tmp"], "--prebuilt goes with --wheel-dir"),
    (["--wheel-dir"], "--wheel-dir needs a directory"),
    (["--wheels", "/tmp"], "unknown argument '--wheels'; expected nothing, or --wheel-dir DIR"),
])
def test_install_horovod_refuses_bad_arguments_before_building(args, message):
    result = subprocess.run(["bash", str(INSTALL_HOROVOD), *args], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and message in result.stderr, result.stderr
