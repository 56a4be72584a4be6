"""The images under test, built from containers/ by containers/build.sh, and podman to run them.

The first test that needs them builds them (the layers the engine already has are reused, so a
code change rebuilds only the layers after it); nothing assumes images from an earlier run.
Where the test set-up compiled Horovod into this environment, the Horovod image is given that
wheel (`build.sh --horovod-wheel-dir`) and skips its own compile when the wheel loads there.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The images these tests run (the beam-worker and GPU images are the release workflow's).
IMAGES = ("runtime", "horovod")
BUILD_SECONDS = 1800
#: Where install-horovod.sh keeps the wheel it built for this environment.
HOROVOD_WHEEL_DIR = Path(sys.prefix) / "share" / "kfdist" / "horovod-wheel"


@pytest.fixture(scope="session")
def podman() -> str:
    """The podman binary (the test set-up installs it: .ci/system-packages.sh)."""
    found = shutil.which("podman")
    assert found, ("podman is missing: the test set-up installs it (.ci/system-packages.sh: "
                   "apt-get install podman buildah runc uidmap debootstrap)")
    return found


@pytest.fixture(scope="session")
def kfdist_images(podman, tmp_path_factory) -> dict:
    """{name: reference} of the images built by `containers/build.sh --engine podman`."""
    log = tmp_path_factory.mktemp("images") / "build.log"
    # pytest-xdist's workers share one image store: one builds while the others wait, then find
    # every layer built (their basetemps share a parent).
    lock = tmp_path_factory.getbasetemp().parent / "kfdist-images.lock"
    with open(lock, "w") as held, open(log, "w") as out:
        fcntl.flock(held, fcntl.LOCK_EX)
        wheel = (["--horovod-wheel-dir", str(HOROVOD_WHEEL_DIR)]
                 if list(HOROVOD_WHEEL_DIR.glob("horovod-*.whl")) else [])
        result = subprocess.run(["bash", str(REPO / "containers" / "build.sh"), "--engine",
                                 "podman", *wheel, *IMAGES], stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO, timeout=BUILD_SECONDS)
    text = log.read_text(errors="replace")
    assert result.returncode == 0, f"containers/build.sh failed:\n{text[-6000:]}"
    import kfdist

    refs = {name: f"{kfdist.DEFAULT_REGISTRY}/kfdist-{name}:{kfdist.__version__}"
            for name in IMAGES}
    for ref in refs.values():
        inspect = subprocess.run([podman, "image", "inspect", ref], capture_output=True,
                                 text=True, timeout=60)
        assert inspect.returncode == 0, f"{ref} was not built:\n{text[-3000:]}"
        assert json.loads(inspect.stdout)[0]["Config"]["User"] == "1000:1000"
    # The runtime image's dependency stage, which build.sh tags too (the PyTorch image's base).
    refs["runtime-deps"] = f"{kfdist.DEFAULT_REGISTRY}/kfdist-runtime-deps:{kfdist.__version__}"
    return refs


def containers_labelled(podman: str, label: str) -> list:
    """Names of the containers (running or not) that carry `label` (a key or key=value)."""
    result = subprocess.run([podman, "ps", "-a", "--filter", f"label={label}", "--format",
                             "{{.Names}}"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def podman_services() -> list:
    """Pids of `podman system service` processes kfdist started (on its private sockets)."""
    from cluster import processes

    return processes.pids_whose_argv(
        lambda words: b"service" in words and any(b"kfdist-podman-" in w for w in words))
