"""Pods of a rendered job started as podman containers, the way the kubelet starts them.

A pod's first container becomes one container of its image, with the pod's own settings
translated, and nothing else:

* `command` replaces the image's entrypoint and `args` its CMD;
* `env` (plain values) plus what the operator injects;
* the pod's `securityContext`: `runAsUser`/`runAsGroup` as the user, `fsGroup` as a supplementary
  group that owns every writable volume (group-writable, set-gid directories, as the kubelet
  makes them), `runAsNonRoot` refused for a root user; the container's:
  `allowPrivilegeEscalation: false` as no-new-privileges, dropped capabilities dropped;
* `volumeMounts` of `persistentVolumeClaim` (a host directory per claim), `secret` and
  `configMap` volumes (their items written as files owned by root, with the volume's mode), at
  the mount path, with `subPath` and `readOnly`;
* the pod's hostname, and its peers' DNS names resolved on one network of the job's own
  (the test network has no DNS, so every name the job uses is an `--add-host`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping

#: Default mode of a Secret or ConfigMap volume's files (Kubernetes' `defaultMode`).
DEFAULT_VOLUME_MODE = 0o644


@dataclasses.dataclass
class KeyFiles:
    """A Secret or ConfigMap's data, to be mounted as the volume that names it."""

    data: Dict[str, str]


def _podman(podman: str, *args: str, timeout: float = 120, check: bool = True) -> str:
    result = subprocess.run([podman, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


class PodRunner:
    """Starts pods of one job as containers on a network of their own; removes all at the end.

    Args:
      podman: The podman binary.
      root: A directory for the files of Secret and ConfigMap volumes.
      claims: Host directory of each PersistentVolumeClaim name.
      objects: `KeyFiles` of each Secret and ConfigMap name.
    """

    def __init__(self, podman: str, root: Path, claims: Mapping[str, Path],
                 objects: Mapping[str, KeyFiles]):
        self.podman, self.root = podman, root
        self.claims, self.objects = dict(claims), dict(objects)
        self.label = f"kfdist.test.job={uuid.uuid4().hex[:10]}"
        self.network = f"kfdist-test-{self.label.rsplit('=', 1)[1]}"
        self._hosts: Dict[str, str] = {}
        self._addresses: Iterator[ipaddress.IPv4Address] = iter(())

    @contextlib.contextmanager
    def running(self) -> Iterator["PodRunner"]:
        """The job's network for the block; every container of the job removed after it."""
        _podman(self.podman, "network", "create", "--label", self.label, self.network)
        subnet = json.loads(_podman(self.podman, "network", "inspect", self.network))[0][
            "subnets"][0]["subnet"]
        hosts = ipaddress.ip_network(subnet).hosts()
        next(hosts)  # the gateway
        self._addresses = hosts
        try:
            yield self
        finally:
            _podman(self.podman, "rm", "--force", "--time", "5", "--ignore",
                    *self.containers(), timeout=300, check=False)
            _podman(self.podman, "network", "rm", "--force", self.network, check=False)

    def containers(self) -> List[str]:
        """Names of the job's containers, running or not."""
        return _podman(self.podman, "ps", "-a", "--filter", f"label={self.label}",
                       "--format", "{{.Names}}").split()

    def address(self, *names: str) -> str:
        """Reserves the next address of the job's network for a pod known by `names`."""
        ip = str(next(self._addresses))
        for name in names:
            self._hosts[name] = ip
        return ip

    def start(self, name: str, pod: Mapping[str, Any], *, env: Mapping[str, str] = (),
              ip: str) -> None:
        """Starts the pod `name` (its template's `spec`) at `ip`, its hostname `name`.

        Args:
          name: The pod's name (and hostname).
          pod: The pod spec (`template.spec`) after the operator's changes.
          env: Variables the operator injects, after the container's own.
          ip: Its address, from `address()`: every name reserved so far resolves in it.
        """
        container = pod["containers"][0]
        argv = ["run", "--detach", "--name", name, "--hostname", name, "--label", self.label,
                "--network", self.network, "--ip", ip]
        for host, host_ip in sorted(self._hosts.items()):
            argv += ["--add-host", f"{host}:{host_ip}"]
        argv += self._security(pod, container)
        for volume_mount in container.get("volumeMounts", []):
            argv += ["--volume", self._mount(pod, volume_mount)]
        variables = {e["name"]: e["value"] for e in container.get("env", [])}
        variables.update(env)
        for key, value in variables.items():
            argv += ["--env", f"{key}={value}"]
        if container.get("command"):
            argv += ["--entrypoint", json.dumps(container["command"])]
        argv += [container["image"], *container.get("args", [])]
        _podman(self.podman, *argv)

    def _security(self, pod: Mapping[str, Any], container: Mapping[str, Any]) -> List[str]:
        context = pod.get("securityContext", {})
        flags = []
        user = context.get("runAsUser")
        if user is not None:
            group = context.get("runAsGroup", user)
            flags += ["--user", f"{user}:{group}"]
        if context.get("runAsNonRoot"):
            assert user not in (None, 0), f"runAsNonRoot without a non-root runAsUser: {context}"
        if context.get("fsGroup") is not None:
            flags += ["--group-add", str(context["fsGroup"])]
        own = container.get("securityContext", {})
        if own.get("allowPrivilegeEscalation") is False:
            flags += ["--security-opt", "no-new-privileges"]
        for capability in own.get("capabilities", {}).get("drop", []):
            flags += ["--cap-drop", capability]
        return flags

    def _mount(self, pod: Mapping[str, Any], volume_mount: Mapping[str, Any]) -> str:
        volume = next(v for v in pod.get("volumes", []) if v["name"] == volume_mount["name"])
        read_only = bool(volume_mount.get("readOnly"))
        if "persistentVolumeClaim" in volume:
            source = self.claims[volume["persistentVolumeClaim"]["claimName"]]
            fs_group = pod.get("securityContext", {}).get("fsGroup")
            if fs_group is not None:
                give_group(source, fs_group)
            read_only = read_only or bool(volume["persistentVolumeClaim"].get("readOnly"))
        else:
            kind = "secret" if "secret" in volume else "configMap"
            source = self._key_files(volume_mount["name"], volume[kind],
                                     volume[kind].get("secretName") or volume[kind].get("name"))
            read_only = True
        if volume_mount.get("subPath"):
            source = source / volume_mount["subPath"]
        return f"{source}:{volume_mount['mountPath']}" + (":ro" if read_only else "")

    def _key_files(self, volume_name: str, source: Mapping[str, Any], object_name: str) -> Path:
        data = self.objects[object_name].data
        folder = self.root / f"{object_name}-{volume_name}"
        folder.mkdir(parents=True, exist_ok=True)
        items = source.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            path = folder / item["path"]
            path.write_text(data[item["key"]])
            os.chmod(path, item.get("mode", source.get("defaultMode", DEFAULT_VOLUME_MODE)))
        return folder

    def wait(self, name: str, timeout: float) -> int:
        """The exit code of the pod `name`'s container, once it ends."""
        return int(_podman(self.podman, "wait", name, timeout=timeout).strip())

    def logs(self, name: str) -> str:
        """The container's output so far."""
        result = subprocess.run([self.podman, "logs", name], capture_output=True, text=True,
                                timeout=60)
        return result.stdout + result.stderr


def give_group(folder: Path, group: int) -> None:
    """What the kubelet does to a volume for `fsGroup`: the group owns it, can write it, and
    new files inherit the group (set-gid directories)."""
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, -1, group)
        mode = path.stat().st_mode
        os.chmod(path, mode | 0o060 | (0o2010 if path.is_dir() else 0))


def pod_name_of(job: Mapping[str, Any], replica_type: str, index: int) -> str:
    """`<job>-<type>-<i>`, the pod (and service) name both operators give a replica."""
    return f"{job['metadata']['name']}-{replica_type.lower()}-{index}"
