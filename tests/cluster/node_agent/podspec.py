"""A pod's container as a `podman run` command line: pure functions of the pod and what the agent
resolved for it (env values, volume directories, its address and DNS)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

#: Label on every container the agent runs: the test bed's id, the pod's uid and container name.
BED_LABEL = "kfdist.test-bed"
POD_LABEL = "kfdist.test-bed.pod"
CONTAINER_LABEL = "kfdist.test-bed.container"
_MEMORY_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
                 "G": 10**9, "T": 10**12, "": 1}


class PodSpecError(ValueError):
    """The pod asks for something the node cannot give (its message is the status's)."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where and how a pod runs: the bed, its network address and name service, its mounts."""

    bed_id: str
    network: str
    ip: str
    dns_server: str
    dns_search: Sequence[str]
    #: podman `--volume` values of each volume name: "HOST" (the mount path is added).
    volume_sources: Mapping[str, str]
    read_only_volumes: frozenset = frozenset()


def container_name(pod: Mapping[str, Any], container: str, attempt: int = 0) -> str:
    """The podman name of a pod's container (`<ns>_<pod>_<container>_<attempt>`, kubelet-like)."""
    meta = pod["metadata"]
    return f"k8s_{container}_{meta['name']}_{meta['namespace']}_{meta['uid'][:8]}_{attempt}"


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (`512Mi`, `1G`, `1e9`) in bytes."""
    text = str(quantity)
    for suffix in sorted(_MEMORY_UNITS, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * _MEMORY_UNITS[suffix])
    return int(float(text))


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity (`500m`, `2`) in cores."""
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def security_flags(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> List[str]:
    """The pod's and container's securityContext as podman flags (container settings win)."""
    context = dict(pod_spec.get("securityContext") or {})
    own = container.get("securityContext") or {}
    for key in ("runAsUser", "runAsGroup", "runAsNonRoot"):
        if own.get(key) is not None:
            context[key] = own[key]
    flags: List[str] = []
    user = context.get("runAsUser")
    if user is not None:
        group = context.get("runAsGroup", user)
        flags += ["--user", f"{user}:{group}"]
    if context.get("runAsNonRoot") and user in (None, 0):
        raise PodSpecError("container has runAsNonRoot and image will run as root")
    if context.get("fsGroup") is not None:
        flags += ["--group-add", str(context["fsGroup"])]
    for group in context.get("supplementalGroups") or []:
        flags += ["--group-add", str(group)]
    if own.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    capabilities = own.get("capabilities") or {}
    for capability in capabilities.get("drop") or []:
        flags += ["--cap-drop", capability]
    for capability in capabilities.get("add") or []:
        flags += ["--cap-add", capability]
    if own.get("readOnlyRootFilesystem"):
        flags += ["--read-only"]
    if own.get("privileged"):
        flags += ["--privileged"]
    return flags


def resource_flags(container: Mapping[str, Any]) -> List[str]:
    """Memory and CPU limits (a memory limit is what makes an OOMKilled)."""
    limits = (container.get("resources") or {}).get("limits") or {}
    flags = []
    if "memory" in limits:
        flags += ["--memory", str(memory_bytes(limits["memory"])), "--memory-swap",
                  str(memory_bytes(limits["memory"]))]
    if "cpu" in limits:
        flags += ["--cpus", f"{cpu_cores(limits['cpu']):g}"]
    return flags


def mount_flags(container: Mapping[str, Any], placement: Placement) -> List[str]:
    """Each volumeMount as `--volume HOST[/SUBPATH]:PATH[:ro]`."""
    flags = []
    for mount in container.get("volumeMounts") or []:
        name = mount["name"]
        if name not in placement.volume_sources:
            raise PodSpecError(f"volume {name!r} of the mount at {mount['mountPath']} is not "
                               "defined in the pod's volumes")
        source = placement.volume_sources[name]
        if mount.get("subPath"):
            source = f"{source}/{mount['subPath']}"
        read_only = mount.get("readOnly") or name in placement.read_only_volumes
        flags += ["--volume", f"{source}:{mount['mountPath']}" + (":ro" if read_only else "")]
    return flags


def run_argv(pod: Mapping[str, Any], container: Mapping[str, Any], env: Mapping[str, str],
             placement: Placement, attempt: int = 0) -> List[str]:
    """The `podman run --detach ...` arguments (without `podman`) of one container of the pod."""
    meta, spec = pod["metadata"], pod["spec"]
    hostname = spec.get("hostname") or meta["name"]
    argv = ["run", "--detach", "--name", container_name(pod, container["name"], attempt),
            "--label", f"{BED_LABEL}={placement.bed_id}",
            "--label", f"{POD_LABEL}={meta['uid']}",
            "--label", f"{CONTAINER_LABEL}={container['name']}",
            "--network", placement.network, "--ip", placement.ip,
            "--hostname", hostname, "--dns", placement.dns_server,
            "--dns-option", "ndots:5", "--pull", "never"]
    for domain in placement.dns_search:
        argv += ["--dns-search", domain]
    if spec.get("subdomain"):
        fqdn = f"{hostname}.{spec['subdomain']}.{meta['namespace']}.svc.cluster.local"
        argv += ["--add-host", f"{fqdn}:{placement.ip}"]
    argv += security_flags(spec, container)
    argv += resource_flags(container)
    argv += mount_flags(container, placement)
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    if container.get("workingDir"):
        argv += ["--workdir", container["workingDir"]]
    if container.get("command"):
        argv += ["--entrypoint", json.dumps([_expand(w, env) for w in container["command"]])]
    argv += [container["image"], *[_expand(w, env) for w in container.get("args", [])]]
    return argv


def field_value(pod: Mapping[str, Any], path: str, node_ip: str) -> str:
    """A downward-API `fieldRef.fieldPath` of the pod (`metadata.labels['k']`, `status.podIP`)."""
    meta = pod["metadata"]
    for prefix, source in (("metadata.labels", meta.get("labels") or {}),
                           ("metadata.annotations", meta.get("annotations") or {})):
        if path.startswith(prefix + "["):
            key = path[len(prefix) + 1:-1].strip("'\"")
            return str(source.get(key, ""))
    simple = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
              "metadata.uid": meta["uid"], "spec.nodeName": pod["spec"].get("nodeName", ""),
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
              "status.podIP": (pod.get("status") or {}).get("podIP", ""),
              "status.hostIP": node_ip}
    if path not in simple:
        raise PodSpecError(f"unsupported fieldRef {path!r}")
    return str(simple[path])


def resource_value(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    """A downward-API `resourceFieldRef` (limits/requests of cpu or memory; 0 when unset)."""
    kind, _, resource = ref["resource"].partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(resource)
    if value is None:
        return "0"
    divisor = ref.get("divisor", "1")
    if resource == "cpu":
        import math
        return str(math.ceil(cpu_cores(value) / cpu_cores(divisor)))
    return str(memory_bytes(value) // memory_bytes(divisor))


def env_of(pod: Mapping[str, Any], container: Mapping[str, Any], node_ip: str,
           lookup) -> Dict[str, str]:
    """The container's environment as the kubelet builds it: `envFrom`, then `env` in order.

    Args:
      pod: The pod (with its status, for `status.podIP`).
      container: One of its containers.
      node_ip: The node's address (`status.hostIP`).
      lookup: `lookup(kind, name)` → the data of a ConfigMap or Secret (decoded), or None.
    """
    env: Dict[str, str] = {}
    for source in container.get("envFrom") or []:
        kind = "configMap" if "configMapRef" in source else "secret"
        ref = source.get("configMapRef") or source.get("secretRef")
        data = lookup(kind, ref["name"])
        if data is None:
            if ref.get("optional"):
                continue
            raise PodSpecError(f'{kind} "{ref["name"]}" not found')
        prefix = source.get("prefix", "")
        env.update({prefix + k: v for k, v in data.items()})
    for item in container.get("env") or []:
        if "valueFrom" not in item:
            env[item["name"]] = _expand(item.get("value", ""), env)
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            env[item["name"]] = field_value(pod, source["fieldRef"]["fieldPath"], node_ip)
        elif "resourceFieldRef" in source:
            env[item["name"]] = resource_value(container, source["resourceFieldRef"])
        else:
            kind = "configMap" if "configMapKeyRef" in source else "secret"
            ref = source.get("configMapKeyRef") or source.get("secretKeyRef")
            data = lookup(kind, ref["name"])
            if data is None or ref["key"] not in data:
                if ref.get("optional"):
                    continue
                raise PodSpecError(f'couldn\'t find key {ref["key"]} in {kind} '
                                   f'{pod["metadata"]["namespace"]}/{ref["name"]}')
            env[item["name"]] = data[ref["key"]]
    return env


def _expand(value: str, env: Mapping[str, str]) -> str:
    """`$(VAR)` references to earlier variables, as the kubelet expands them (`$$` escapes)."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i) and ")" in value[i:]:
            end = value.index(")", i)
            name = value[i + 2:end]
            out.append(env[name] if name in env else value[i:end + 1])
            i = end + 1
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def restart_wanted(restart_policy: Optional[str], exit_code: int) -> bool:
    """Whether the kubelet restarts a container that exited with `exit_code`."""
    policy = restart_policy or "Always"
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)
