"""A podman image into containerd, sending only the layers containerd does not hold yet.

`podman save` writes every layer of an image (kfdist's are about 3.7 GB), and `ctr images import`
of that archive hashes and stores all of it again, unpacking what it already had: some 190
CPU-seconds per image on this machine, paid at every change of kfdist's code (one small layer).
Here podman's docker archive is turned, as it streams, into an OCI archive (the image layout
containerd's importer reads) whose manifest names every layer but that carries only the layers
missing from containerd's content store; containerd unpacks only those (a layer's snapshot is
found by its chain id). A layer it holds is the same bytes: a docker archive's layer is named by
its uncompressed digest, which is how containerd stored it.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from typing import Iterable, List

#: Read size of the streams: a skipped layer is read through in pieces of this size.
CHUNK = 1 << 20
LAYER = "application/vnd.oci.image.layer.v1.tar"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"


def present_blobs(ctr: List[str]) -> set:
    """The digests (`sha256:...`) in containerd's content store; `ctr` its command and options."""
    listed = subprocess.run([*ctr, "content", "ls", "-q"], capture_output=True, text=True,
                            timeout=120, check=True)
    return set(listed.stdout.split())


def import_image(ctr: List[str], reference: str, name: str, timeout: float,
                 every_layer: bool = False) -> str:
    """Streams podman's image `reference` into containerd as `name`, with only its missing
    layers; returns ctr's error output, empty when it succeeded.

    Args:
      ctr: The `ctr` command with its address and namespace options.
      reference: podman's name of the image.
      name: The name containerd gives it (fully qualified, as the kubelet asks for it).
      timeout: Seconds the whole import may take.
      every_layer: Send every layer, as `podman save | ctr images import` would.
    """
    present = set() if every_layer else present_blobs(ctr)
    with tempfile.TemporaryFile() as errors:
        save = subprocess.Popen(["podman", "save", "--format", "docker-archive", reference],
                                stdout=subprocess.PIPE, bufsize=CHUNK)
        load = subprocess.Popen([*ctr, "images", "import", "--no-unpack=false", "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=errors, bufsize=CHUNK)
        streamed = ""
        try:
            convert(save.stdout, load.stdin, present, name)
        except (OSError, tarfile.TarError, ValueError) as err:  # either side ended early
            streamed = f"streaming {reference}: {type(err).__name__}: {err}"
        finally:
            save.stdout.close()
            load.stdin.close()
            loaded, saved = load.wait(timeout=timeout), save.wait(timeout=timeout)
        errors.seek(0)
        error = errors.read().decode(errors="replace").strip()
    if saved != 0:
        return f"podman save {reference} failed"
    return "" if loaded == 0 and not streamed else (error or streamed)


def convert(docker_archive, oci_archive, present: Iterable[str], name: str) -> None:
    """Writes the OCI archive of the image in the stream `docker_archive` (one image, as
    `podman save --format docker-archive` writes it) to the stream `oci_archive`, leaving out
    the layers whose digests are `present`."""
    present = set(present)
    sizes, config, manifest = {}, None, None
    with tarfile.open(fileobj=docker_archive, mode="r|", bufsize=CHUNK) as source, \
            tarfile.open(fileobj=oci_archive, mode="w|", bufsize=CHUNK) as target:
        for member in source:
            stem, _, suffix = member.name.partition(".")
            if member.isfile() and "/" not in member.name and suffix == "tar":
                sizes[f"sha256:{stem}"] = member.size
                if f"sha256:{stem}" not in present:
                    blob = tarfile.TarInfo(f"blobs/sha256/{stem}")
                    blob.size = member.size
                    target.addfile(blob, source.extractfile(member))
            elif member.name == "manifest.json":
                manifest = json.load(source.extractfile(member))[0]
            elif member.isfile() and "/" not in member.name and suffix == "json":
                config = source.extractfile(member).read()
        if manifest is None or config is None:
            raise ValueError("not a docker archive of one image: no manifest.json or config")
        layers = [f"sha256:{path.split('/')[-1].removesuffix('.tar')}"
                  for path in manifest["Layers"]]
        image = _json_bytes({
            "schemaVersion": 2, "mediaType": MANIFEST,
            "config": {"mediaType": CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER, "digest": d, "size": sizes[d]} for d in layers]})
        index = _json_bytes({"schemaVersion": 2, "manifests": [{
            "mediaType": MANIFEST, "digest": _digest(image), "size": len(image),
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name}}]})
        for path, data in ((f"blobs/sha256/{_digest(config)[7:]}", config),
                           (f"blobs/sha256/{_digest(image)[7:]}", image),
                           ("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                           ("index.json", index)):
            entry = tarfile.TarInfo(path)
            entry.size = len(data)
            target.addfile(entry, io.BytesIO(data))


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json_bytes(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
