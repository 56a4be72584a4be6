"""The test bed's image import (`tests/cluster/image_import.py`): a docker archive becomes an OCI
archive that carries only the layers containerd lacks, its manifest naming every layer."""

import hashlib
import io
import json
import tarfile

from cluster import image_import


def _docker_archive(layers: list, config: bytes) -> bytes:
    """A docker archive as `podman save` writes it: `<diff id>.tar` layers, the config as
    `<image id>.json`, a `<id>/layer.tar` link per layer and `manifest.json` last."""
    names = [hashlib.sha256(layer).hexdigest() + ".tar" for layer in layers]
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": ["example.com/a:1"],
                            "Layers": names}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in [*zip(names, layers), (config_name, config)]:
            _add(archive, name, data)
        for name in names:
            link = tarfile.TarInfo(f"{name[:12]}/layer.tar")
            link.type, link.linkname = tarfile.SYMTYPE, f"../{name}"
            archive.addfile(link)
        _add(archive, "manifest.json", manifest)
    return out.getvalue()


def _add(archive, name: str, data: bytes) -> None:
    entry = tarfile.TarInfo(name)
    entry.size = len(data)
    archive.addfile(entry, io.BytesIO(data))


def test_only_the_missing_layers_are_carried_and_the_manifest_names_them_all():
    layers, config = [b"base layer" * 1000, b"code layer"], b'{"rootfs": {}}'
    digests = ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]
    out = io.BytesIO()
    image_import.convert(io.BytesIO(_docker_archive(layers, config)), out, {digests[0]},
                         "example.com/a:1")
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as archive:
        files = {m.name: archive.extractfile(m).read() for m in archive if m.isfile()}
    blobs = {"sha256:" + name.rsplit("/", 1)[1]: data for name, data in files.items()
             if name.startswith("blobs/")}
    assert digests[0] not in blobs and blobs[digests[1]] == layers[1]
    [entry] = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "example.com/a:1"
    manifest = json.loads(blobs[entry["digest"]])
    assert [(d["digest"], d["size"]) for d in manifest["layers"]] == [
        (digests[0], len(layers[0])), (digests[1], len(layers[1]))]
    assert blobs[manifest["config"]["digest"]] == config
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
