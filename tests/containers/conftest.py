"""The images under test, built from containers/ by containers/build.sh, and podman to run them.

The first test that needs them builds them (the layers the engine already has are reused, so a
code change rebuilds only the layers after it); nothing assumes images from an earlier run.
Where the test set-up compiled Horovod into this environment, the Horovod image is given that
wheel (`build.sh --horovod-wheel-dir`) and skips its own compile when the wheel loads there.
"""

from __future__ import annotations

import fcntl
import json
import os
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


#: The bed's PyTorch image (tests/cluster/images/pytorch.Dockerfile on the runtime image).
PYTORCH_IMAGE = "localhost/kfdist-test/pytorch"


def torch_requirement() -> str:
    """The torch pin of pyproject.toml's `torch` extra (defined once, there)."""
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as f:
        [requirement] = tomllib.load(f)["project"]["optional-dependencies"]["torch"]
    return requirement


@pytest.fixture(scope="session")
def pytorch_image(kfdist_images) -> str:
    """kfdist's runtime image with PyTorch (built once; podman reuses its layers after: torch's
    stays until the runtime's dependencies change), tagged with kfdist's and torch's versions (a
    job's image is pinned)."""
    import kfdist

    reference = (f"{PYTORCH_IMAGE}:{kfdist.__version__}-torch"
                 f"{torch_requirement().split('==')[-1]}")
    certificate = os.environ.get("PIP_CERT", "")
    secret = (["--secret", f"id=pip-cert,src={certificate}"]
              if certificate and os.path.isfile(certificate) else [])
    previous = _image_id(reference)
    built = subprocess.run(
        ["podman", "build", *secret, "--build-arg", f"RUNTIME_IMAGE={kfdist_images['runtime']}",
         "--build-arg", f"DEPS_IMAGE={kfdist_images['runtime-deps']}",
         "--build-arg", f"KFDIST_VERSION={kfdist.__version__}",
         "--build-arg", f"TORCH_REQUIREMENT={torch_requirement()}", "-t", reference,
         "-f", str(REPO / "tests" / "cluster" / "images" / "pytorch.Dockerfile"),
         str(REPO / "tests" / "cluster" / "images")], capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    built_id = _image_id(reference)
    assert built_id, f"{reference} is not there after its build"
    if previous and previous != built_id:
        # The rebuilt tag's old image (untagged now), as containers/build.sh does.
        subprocess.run(["podman", "rmi", previous], capture_output=True, timeout=300)
    return reference


def _image_id(reference: str) -> str:
    found = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", reference],
                           capture_output=True, text=True, timeout=60)
    return found.stdout.strip() if found.returncode == 0 else ""


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
