"""The images the genuine node runs that no registry can give it here, and their import into
containerd's `k8s.io` namespace (where the kubelet's CRI finds them).

* the pod sandbox: Kubernetes' own `pause` (its `build/pause/linux/pause.c`, from the
  k8s.io/kubernetes module the bed builds from), compiled static;
* CoreDNS and local-path-provisioner: their static binaries (`build.sh`), alone in an image;
* the provisioner's helper pods' image: Debian's static busybox (`busybox-static`), which gives
  them the `sh`, `mkdir` and `rm` its scripts run.

Each is built with podman once per binary (its tag is the binary's cache key), and imported into
containerd only when podman's image differs from the one imported last (`IMPORTED` records which),
with only the layers containerd lacks (`image_import`); an image containerd holds under another
name is only given the new name there.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Dict, Mapping

from cluster import image_import, node_config, processes

BUSYBOX = Path("/bin/busybox")
#: In containerd's root: {image reference: podman's image id} of what was imported.
IMPORTED = "kfdist-imported.json"
BUILD_TIMEOUT_S = 600


def _tag_of(binary: str) -> str:
    """A cached binary's directory name (`VERSION-KEY`): it changes whenever the binary does."""
    return Path(binary).parent.name


def _podman_has(reference: str) -> bool:
    return subprocess.run(["podman", "image", "exists", reference]).returncode == 0


def _podman_build(reference: str, containerfile: str, files: Mapping[str, Path]) -> None:
    with tempfile.TemporaryDirectory() as context:
        for name, source in files.items():
            if Path(source).is_dir():
                shutil.copytree(source, Path(context) / name)
                (Path(context) / name).chmod(Path(source).stat().st_mode & 0o7777)
            else:
                shutil.copy2(source, Path(context) / name)
        (Path(context) / "Containerfile").write_text(containerfile)
        result = subprocess.run(["podman", "build", "-q", "--format", "docker", "--network",
                                 "none", "-t", reference, context], capture_output=True,
                                text=True, timeout=BUILD_TIMEOUT_S)
    if result.returncode != 0:
        raise processes.StartFailed(f"building {reference}: {result.stderr.strip()}")


def pause_source() -> Path:
    """`pause.c` of the k8s.io/kubernetes module the bed's Kubernetes binaries come from."""
    from cluster import operator_sources

    module = operator_sources.Module("kubernetes", "k8s.io/kubernetes")
    return module.source() / "build" / "pause" / "linux" / "pause.c"


def _pause_binary(cache: Path, version: str) -> Path:
    binary = cache / "pause" / version / "pause"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        staging = binary.with_suffix(".building")
        result = subprocess.run(["gcc", "-Os", "-static", "-Wall", "-Werror",
                                 f"-DVERSION=\"{version}\"", "-o", str(staging),
                                 str(pause_source())], capture_output=True, text=True)
        if result.returncode != 0:
            raise processes.StartFailed(f"compiling pause.c: {result.stderr.strip()}")
        staging.rename(binary)
    return binary


def build_images(binaries: Dict[str, str], cache: Path, kube_version: str) -> Dict[str, str]:
    """Builds, with podman, every image the node runs that the bed makes itself.

    Args:
      binaries: {name: path} of the bed's binaries (`build.sh`).
      cache: The build cache (where the compiled `pause` is kept).
      kube_version: The Kubernetes version (the pause image's tag).

    Returns:
      {"pause" | "coredns" | "local-path-provisioner" | "busybox": image reference}.
    """
    if not BUSYBOX.exists():
        raise processes.StartFailed(f"{BUSYBOX} is missing: apt-get install busybox-static "
                                    "(.ci/system-packages.sh installs it)")
    pause = _pause_binary(cache, kube_version)
    wanted = {
        "pause": (node_config.image("pause", kube_version),
                  'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n',
                  {"pause": pause}),
        "coredns": (node_config.image("coredns", _tag_of(binaries["coredns"])),
                    'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\n'
                    'ENTRYPOINT ["/coredns"]\n', {"coredns": Path(binaries["coredns"])}),
        "local-path-provisioner": (
            node_config.image("local-path-provisioner",
                              _tag_of(binaries["local-path-provisioner"])),
            'FROM scratch\nCOPY local-path-provisioner /local-path-provisioner\n'
            'ENTRYPOINT ["/local-path-provisioner"]\n',
            {"local-path-provisioner": Path(binaries["local-path-provisioner"])}),
        "busybox": (node_config.image("busybox", _busybox_version()),
                    'FROM scratch\nCOPY busybox /bin/busybox\n'
                    'RUN ["/bin/busybox", "--install", "-s", "/bin"]\nCMD ["sh"]\n',
                    {"busybox": BUSYBOX})}
    for reference, containerfile, files in wanted.values():
        if not _podman_has(reference):
            _podman_build(reference, containerfile, files)
    return {name: entry[0] for name, entry in wanted.items()}


#: Kubeflow Pipelines' images, as its Dockerfiles make them but from scratch: each static
#: binary, a writable /tmp (the driver writes its outputs there), a numeric non-root user (every
#: KFP and Argo container runs with `runAsNonRoot`) and a PATH (Argo's `init` finds `argoexec` on
#: it to copy it into the shared volume each step's container runs it from).
KFP_IMAGES = {"kfp-driver": ("kfp-driver", "/bin/driver"),
              "kfp-launcher": ("kfp-launcher", "/bin/launcher-v2"),
              "argoexec": ("argoexec", "/bin/argoexec")}
NONROOT_USER = 65532


def build_kfp_images(binaries: Dict[str, str]) -> Dict[str, str]:
    """Builds KFP's driver and launcher images and Argo's executor image with podman.

    Args:
      binaries: {name: path} of the bed's binaries (`build.sh kfp`).

    Returns:
      {"kfp-driver" | "kfp-launcher" | "argoexec": image reference}.
    """
    return {name: _binary_image(name, binaries[binary], target,
                                f"ENV PATH=/bin\nUSER {NONROOT_USER}:{NONROOT_USER}\n",
                                {"etc/nsswitch.conf": "hosts: files dns\n"})
            for name, (binary, target) in KFP_IMAGES.items()}


def build_operator_image(name: str, binary: str) -> str:
    """Builds the image of an operator that runs as a pod on the genuine node: its static
    binary at `/NAME` and a writable /tmp (klog's log files), run as root as its release's
    image is; returns its reference."""
    return _binary_image(name, binary, f"/{name}")


def _binary_image(name: str, binary: str, target: str, settings: str = "",
                  files: Mapping[str, str] = MappingProxyType({})) -> str:
    """Builds (unless podman has it) an image `FROM scratch` of static `binary` at `target`, a
    writable /tmp, `files` ({path: text}) and the Containerfile `settings`, `target` its
    entry point; returns its reference, tagged by the binary's cache key and the recipe."""
    containerfile = f"FROM scratch\nCOPY rootfs/ /\n{settings}ENTRYPOINT [\"{target}\"]\n"
    recipe = hashlib.sha256(containerfile.encode()).hexdigest()[:8]
    reference = node_config.image(name, f"{_tag_of(binary)}-{recipe}")
    if _podman_has(reference):
        return reference
    with tempfile.TemporaryDirectory() as extras:
        rootfs = Path(extras) / "rootfs"
        for path, text in files.items():
            (rootfs / path).parent.mkdir(parents=True, exist_ok=True)
            (rootfs / path).write_text(text)
        (rootfs / "tmp").mkdir(parents=True)
        (rootfs / "tmp").chmod(0o1777)  # COPY of a folder keeps the modes of what it holds
        (rootfs / target.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(binary, rootfs / target.lstrip("/"))
        _podman_build(reference, containerfile, {"rootfs": rootfs})
    return reference


def _busybox_version() -> str:
    found = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "busybox-static"],
                           capture_output=True, text=True)
    version = found.stdout.strip().split(":")[-1] or "unknown"
    return version.replace("+", "_").replace("~", "_")


def podman_image_id(reference: str) -> str:
    found = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", reference],
                           capture_output=True, text=True, timeout=60)
    if found.returncode != 0:
        raise processes.StartFailed(f"image {reference} is not in podman's store: "
                                    f"{found.stderr.strip()}")
    return found.stdout.strip()


def import_images(ctr: str, socket: Path, containerd_root: Path, references) -> list:
    """Imports each podman image into containerd's `k8s.io` namespace unless the same image was
    imported before (only the layers containerd lacks: `image_import`); an image imported under
    another name is only named anew there. Returns the references imported or named now."""
    record_path = containerd_root / IMPORTED
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        record = {}
    command = [ctr, "--address", str(socket), "-n", "k8s.io"]
    present = set(subprocess.run([*command, "images", "ls", "-q"], capture_output=True,
                                 text=True, timeout=120, check=True).stdout.split())
    imported = []
    for reference in references:
        image_id = podman_image_id(reference)
        name = _containerd_name(reference)
        if record.get(reference) == image_id and name in present:
            continue
        twin = next((other for other, other_id in record.items() if other_id == image_id
                     and _containerd_name(other) in present), None)
        if twin is not None:  # the same image under another name: containerd's gets it too
            _tag(command, _containerd_name(twin), name)
        else:
            _import(command, reference, name)
        present.add(name)
        record[reference] = image_id
        record_path.write_text(json.dumps(record, indent=1))
        imported.append(reference)
    return imported


def _import(command: list, reference: str, name: str) -> None:
    """Imports podman's `reference` as `name` (only the layers containerd lacks)."""
    error = image_import.import_image(command, reference, name, BUILD_TIMEOUT_S)
    if error:  # a layer it held went meanwhile: every layer, once more
        error = image_import.import_image(command, reference, name, BUILD_TIMEOUT_S,
                                          every_layer=True)
    if error:
        raise processes.StartFailed(f"importing {reference} into containerd: {error}")


def _tag(command: list, source: str, name: str) -> None:
    """Names containerd's image `source` `name` as well (saving a podman image of several GB
    again only to find every layer present costs a CPU-minute or more)."""
    tagged = subprocess.run([*command, "images", "tag", "--force", source, name],
                            capture_output=True, text=True, timeout=120)
    if tagged.returncode != 0:
        raise processes.StartFailed(f"naming containerd's {source} {name}: "
                                    f"{tagged.stderr.strip()}")


def _containerd_name(reference: str) -> str:
    """The name the kubelet asks containerd for (a fully qualified reference: `docker.io/` is
    added to a name without a registry), which the import gives the image."""
    first = reference.split("/", 1)[0]
    if "/" not in reference or not ("." in first or ":" in first or first == "localhost"):
        return f"docker.io/{reference if '/' in reference else 'library/' + reference}"
    return reference
