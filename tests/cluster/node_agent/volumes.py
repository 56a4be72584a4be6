"""A pod's volumes as host directories, made as the kubelet makes them.

A PersistentVolumeClaim is the directory `ROOT/volumes/<namespace>/<claim>` (so a person can put
data there and read results back); Secrets, ConfigMaps, the downward API and projected volumes
(the ServiceAccount token's included) are files written before the containers start; an emptyDir
is a directory of the pod's own. With `fsGroup` the group owns the volume and can read it
(write it too, unless it is read-only), new files inheriting the group, as the kubelet sets it.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from cluster.node_agent.podspec import PodSpecError, field_value

DEFAULT_MODE = 0o644
READ_ONLY_KINDS = ("secret", "configMap", "downwardAPI", "projected")


class MissingSource(PodSpecError):
    """A Secret or ConfigMap a volume needs is not in the API (the kubelet's words)."""


def claim_directory(root: Path, namespace: str, claim: str) -> Path:
    """Where the claim `namespace/claim` keeps its data on this machine."""
    return Path(root) / "volumes" / namespace / claim


def _give_group(folder: Path, group: int, writable: bool) -> None:
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, -1, group)
        mode = path.stat().st_mode
        extra = (0o060 if writable else 0o040) | (0o2010 if path.is_dir() else 0)
        os.chmod(path, mode | extra)


def _write_items(folder: Path, data: Mapping[str, str], items, default_mode: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for item in items or [{"key": k, "path": k} for k in data]:
        if item["key"] not in data:
            continue
        path = folder / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]])
        os.chmod(path, item.get("mode", default_mode))


class VolumeSetUpError(PodSpecError):
    """A volume that cannot be made yet (its Secret or ConfigMap is missing): the kubelet keeps
    the containers ContainerCreating and says why in a FailedMount event."""

    def __init__(self, volume: str, problem: str):
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {problem}')
        self.volume = volume


class VolumeMaker:
    """Makes the volumes of pods.

    Args:
      root: The test bed's directory (claims under `volumes/`, pods' own under `pods/`).
      lookup: `lookup(kind, namespace, name)` → decoded data of a ConfigMap or Secret, or None.
      token: `token(namespace, service_account, audience, seconds, pod)` → a bound token.
      node_ip: The node's address (`status.hostIP` for the downward API).
    """

    def __init__(self, root: Path, lookup: Callable, token: Callable, node_ip: str):
        self.root, self.lookup, self.token, self.node_ip = Path(root), lookup, token, node_ip

    def pod_directory(self, pod: Mapping[str, Any]) -> Path:
        return self.root / "pods" / pod["metadata"]["uid"]

    def make(self, pod: Mapping[str, Any]) -> Tuple[Dict[str, str], frozenset]:
        """Every volume of `pod`: ({name: host path}, names of read-only volumes)."""
        sources: Dict[str, str] = {}
        read_only = set()
        fs_group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        for volume in pod["spec"].get("volumes") or []:
            try:
                path, kind = self._make_one(pod, volume)
            except MissingSource as missing:
                raise VolumeSetUpError(volume["name"], str(missing)) from None
            if fs_group is not None and kind != "hostPath":
                _give_group(path, fs_group, writable=kind not in READ_ONLY_KINDS)
            sources[volume["name"]] = str(path)
            if kind in READ_ONLY_KINDS:
                read_only.add(volume["name"])
        return sources, frozenset(read_only)

    def _make_one(self, pod: Mapping[str, Any], volume: Mapping[str, Any]) -> Tuple[Path, str]:
        namespace = pod["metadata"]["namespace"]
        own = self.pod_directory(pod) / "volumes" / volume["name"]
        if "persistentVolumeClaim" in volume:
            path = claim_directory(self.root, namespace, volume["persistentVolumeClaim"]["claimName"])
            if not path.exists():
                path.mkdir(parents=True)
                os.chmod(path, 0o777)  # as a local-path provisioner makes a new volume
            return path, "persistentVolumeClaim"
        if "emptyDir" in volume:
            own.mkdir(parents=True, exist_ok=True)
            os.chmod(own, 0o777)
            return own, "emptyDir"
        if "hostPath" in volume:
            path = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type") in ("DirectoryOrCreate",):
                path.mkdir(parents=True, exist_ok=True)
            return path, "hostPath"
        for kind in ("secret", "configMap"):
            if kind in volume:
                source = volume[kind]
                name = source.get("secretName") or source.get("name")
                data = self._data(kind, namespace, name, source.get("optional"))
                _write_items(own, data, source.get("items"), source.get("defaultMode", DEFAULT_MODE))
                return own, kind
        if "downwardAPI" in volume:
            self._downward(pod, own, volume["downwardAPI"].get("items") or [],
                           volume["downwardAPI"].get("defaultMode", DEFAULT_MODE))
            return own, "downwardAPI"
        if "projected" in volume:
            self._projected(pod, own, volume["projected"])
            return own, "projected"
        raise PodSpecError(f"volume {volume['name']!r}: its kind is not supported by the test bed's "
                           f"node ({sorted(k for k in volume if k != 'name')})")

    def _data(self, kind: str, namespace: str, name: str, optional: Optional[bool]) -> Dict[str, str]:
        data = self.lookup(kind, namespace, name)
        if data is None:
            if optional:
                return {}
            raise MissingSource(f'{kind.lower()} "{name}" not found')
        return data

    def _downward(self, pod, folder: Path, items, mode: int) -> None:
        data = {item["path"]: field_value(pod, item["fieldRef"]["fieldPath"], self.node_ip)
                for item in items if "fieldRef" in item}
        _write_items(folder, data, None, mode)

    def _projected(self, pod, folder: Path, projected: Mapping[str, Any]) -> None:
        namespace = pod["metadata"]["namespace"]
        mode = projected.get("defaultMode", DEFAULT_MODE)
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                spec = source["serviceAccountToken"]
                token = self.token(namespace, pod["spec"].get("serviceAccountName", "default"),
                                   spec.get("audience"), spec.get("expirationSeconds", 3607), pod)
                _write_items(folder, {spec["path"]: token}, None, mode)
            elif "downwardAPI" in source:
                self._downward(pod, folder, source["downwardAPI"].get("items") or [], mode)
            else:
                kind = "configMap" if "configMap" in source else "secret"
                ref = source[kind]
                data = self._data(kind, namespace, ref["name"], ref.get("optional"))
                _write_items(folder, data, ref.get("items"), mode)


def decode_secret(data: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """A Secret's base64 `data` as text."""
    return {k: base64.b64decode(v).decode(errors="replace") for k, v in (data or {}).items()}
