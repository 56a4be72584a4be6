"""What the pipeline author set on the training task itself, and how it joins kfdist's settings.

KFP 2.15+ hands a component that declares `task_config_passthroughs` a
`dsl.TaskConfig`: the resources, environment, node selector, tolerations,
affinity and volumes set on its task (`task.set_accelerator_limit(1)`,
`kfp.kubernetes.add_toleration(task, ...)`, ...), and sets those declared with
`apply_to_task=False` no longer on the step's own pod. `train_distributed` and
`train_program` declare `PASSTHROUGHS` and give what they receive to every
replica of the job they create. The rule:

* Resources, node selector, tolerations, affinity go to the replicas only:
  the step's pod (which waits on the job) holds no GPUs and needs no GPU
  node's taints or labels.
* Resources are each replica's, by kfdist's rule for its own: GPUs and other
  accelerators only on the replicas that compute (not on a parameter server,
  a `parameter_server` chief or an MPI launcher; a TrainJob gives every node
  the same). Where `cpu_per_worker`, `memory_per_worker` or `gpus_per_worker`
  is set, it wins for that resource (its request and limit).
* Node selector: the task's labels and `node_selector`'s; on the same key,
  `node_selector` wins. Tolerations and affinity: the task's (kfdist sets
  none of its own).
* Environment and volumes stay on the step's pod too (`apply_to_task=True`:
  it may need a proxy, a secret, or the PVC of its work location) and are
  added to each replica's after kfdist's own. A variable kfdist or the
  operator sets on the replicas (`TF_CONFIG`, the PyTorch variables, any
  `KFDIST_*`) keeps their value, and `KFP_*` variables (KFP's own, such as
  the step pod's identity `KFP_POD_NAME`) describe the step and are not passed
  on. A task volume mounted where kfdist mounts its own (`pvc_name`, at
  /mnt/kfdist) gives way to kfdist's.

Outside KFP's driver (kfp.local, `kfdist train`, `kfdist render`) the
TaskConfig is empty and the job is what kfdist's parameters alone make.
"""

from __future__ import annotations

import dataclasses
import decimal
import posixpath
from typing import Any, Collection, Dict, Mapping, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_parts import (
    GPU_RESOURCE, PodExtras, Resources, Toleration, check_string_map)

#: The parameter of both training components that KFP fills (`dsl.TaskConfig`).
TASK_CONFIG_PARAM = "task_config"
#: What the training steps take from their task: (`dsl.TaskConfigField` name, whether KFP also
#: applies it to the step's own pod).
PASSTHROUGHS: Tuple[Tuple[str, bool], ...] = (
    ("RESOURCES", False), ("KUBERNETES_NODE_SELECTOR", False),
    ("KUBERNETES_TOLERATIONS", False), ("KUBERNETES_AFFINITY", False),
    ("ENV", True), ("KUBERNETES_VOLUMES", True))
#: Variable prefixes that belong to the step (KFP's) or to kfdist, never taken from the task.
STEP_ENV_PREFIXES = ("KFP_", "KFDIST_")
_TOLERATION_KEYS = {"key": "key", "operator": "operator", "value": "value", "effect": "effect",
                    "tolerationSeconds": "toleration_seconds"}
_AFFINITY_KEYS = ("nodeAffinity", "podAffinity", "podAntiAffinity")


@dataclasses.dataclass(frozen=True)
class TaskSettings:
    """The pod settings of the KFP task that launches the job, as KFP passed them.

    Attributes:
      resources: The task's CPU and memory requests and limits, GPUs and other accelerators.
      node_selector: The task's node selector.
      tolerations: The task's tolerations.
      pod: The task's affinity, environment and volumes.
    """

    resources: Resources = Resources()
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: Tuple[Toleration, ...] = ()
    pod: PodExtras = PodExtras()

    def resources_under(self, own: Resources) -> Resources:
        """`own` (kfdist's per-worker settings), the task's resources where `own` sets none."""
        task = self.resources
        cpu = own.cpu is not None or own.cpu_limit is not None
        memory = own.memory is not None or own.memory_limit is not None
        return Resources(cpu=own.cpu if cpu else task.cpu,
                         cpu_limit=own.cpu_limit if cpu else task.cpu_limit,
                         memory=own.memory if memory else task.memory,
                         memory_limit=own.memory_limit if memory else task.memory_limit,
                         gpus=own.gpus or task.gpus,
                         accelerators={**task.accelerators, **own.accelerators})

    def node_selector_under(self, own: Mapping[str, str]) -> Dict[str, str]:
        """The task's node labels and `own`'s; `own` wins on a key both set."""
        return {**self.node_selector, **own}

    def replica_extras(self, reserved_env: Collection[str],
                       kfdist_mount_paths: Collection[str]) -> PodExtras:
        """The task's affinity, environment and volumes, less what kfdist sets itself.

        Args:
          reserved_env: Variables kfdist or the operator sets on the replicas.
          kfdist_mount_paths: Where kfdist mounts its own volumes into the replicas.
        """
        env = tuple(e for e in self.pod.env if e["name"] not in reserved_env
                    and not e["name"].startswith(STEP_ENV_PREFIXES))
        kfdist_paths = {posixpath.normpath(p) for p in kfdist_mount_paths}
        mounts = tuple(m for m in self.pod.volume_mounts
                       if posixpath.normpath(m["mountPath"]) not in kfdist_paths)
        mounted = {m["name"] for m in mounts}
        given_way = {m["name"] for m in self.pod.volume_mounts} - mounted
        volumes = tuple(v for v in self.pod.volumes if v["name"] not in given_way)
        return PodExtras(affinity=self.pod.affinity, env=env, volumes=volumes,
                         volume_mounts=mounts)


def from_task_config(task_config: Any) -> TaskSettings:
    """The settings in the step's `dsl.TaskConfig` argument, checked.

    Args:
      task_config: What KFP's executor passes (`kfp.dsl.executor`: a `dsl.TaskConfig` whose
        fields are the JSON its driver wrote, Kubernetes' camelCase within); None, or all
        fields None (kfp.local passes nothing), for none.

    Raises:
      InvalidInputError: Naming a value Kubernetes would refuse.
    """
    if task_config is None:
        return TaskSettings()
    fields = ("resources", "node_selector", "tolerations", "affinity", "env", "volumes",
              "volume_mounts")
    require(all(hasattr(task_config, name) for name in fields),
            f"task_config must be the dsl.TaskConfig KFP passes, got {task_config!r}")

    def field(name: str) -> Any:
        return getattr(task_config, name)

    node_selector = dict(field("node_selector") or {})
    check_string_map("the task's node selector", node_selector, values_are_labels=True)
    return TaskSettings(
        resources=_resources(field("resources")), node_selector=node_selector,
        tolerations=tuple(_toleration(t) for t in _entries("tolerations", field("tolerations"))),
        pod=_pod(field("affinity"), field("env"), field("volumes"), field("volume_mounts")))


def _entries(what: str, value: Any) -> Tuple[Mapping[str, Any], ...]:
    value = value or []
    require(isinstance(value, list) and all(isinstance(v, Mapping) for v in value),
            f"the task's {what} must be a list of objects, got {value!r}")
    return tuple(dict(v) for v in value)


def _resources(value: Any) -> Resources:
    value = value or {}
    require(isinstance(value, Mapping) and set(value) <= {"limits", "requests", "claims"}
            and not value.get("claims"),
            f"the task's resources must hold limits and requests only, got {value!r}")
    limits, requests = dict(value.get("limits") or {}), dict(value.get("requests") or {})
    require(set(requests) <= {"cpu", "memory"}, f"the task requests {sorted(requests)}: kfdist "
            "passes on CPU and memory requests, and accelerators as limits")
    gpus = limits.pop(GPU_RESOURCE, None)
    cpu_limit, memory_limit = limits.pop("cpu", None), limits.pop("memory", None)
    resources = Resources(
        cpu=_quantity(requests.get("cpu")), memory=_quantity(requests.get("memory")),
        cpu_limit=_quantity(cpu_limit), memory_limit=_quantity(memory_limit),
        gpus=0 if gpus is None else _count(GPU_RESOURCE, gpus),
        accelerators={name: _count(name, count) for name, count in limits.items()})
    resources.validate("The task's resources")
    return resources


def _quantity(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _count(name: str, value: Any) -> int:
    """A whole number of devices (KFP writes quantities as strings, e.g. "1")."""
    quantity = k8s.parse_quantity(str(value))
    if quantity is None or quantity != quantity.to_integral_value() or quantity < 1:
        raise InvalidInputError(f"the task's {name} limit {value!r} is not a whole number of "
                                "devices")
    return int(quantity.to_integral_value(decimal.ROUND_DOWN))


def _toleration(value: Mapping[str, Any]) -> Toleration:
    unknown = sorted(set(value) - set(_TOLERATION_KEYS))
    require(not unknown, f"the task's toleration {dict(value)!r} has unknown fields {unknown}")
    fields = {_TOLERATION_KEYS[k]: v for k, v in value.items() if v not in (None, "")}
    seconds = fields.get("toleration_seconds")
    if isinstance(seconds, float) and seconds.is_integer():  # a JSON number through protobuf
        fields["toleration_seconds"] = int(seconds)
    toleration = Toleration(**{"operator": "Equal", **fields})  # Kubernetes' default operator
    toleration.validate()
    return toleration


def _pod(affinity: Any, env: Any, volumes: Any, mounts: Any) -> PodExtras:
    require(affinity is None or (isinstance(affinity, Mapping)
                                 and set(affinity) <= set(_AFFINITY_KEYS)),
            f"the task's affinity must be an object of {list(_AFFINITY_KEYS)}, got {affinity!r}")
    extras = PodExtras(affinity=dict(affinity) if affinity else None, env=_entries("env", env),
                       volumes=_entries("volumes", volumes),
                       volume_mounts=_entries("volume mounts", mounts))
    for var in extras.env:
        require(k8s.is_env_name(var.get("name")) and set(var) <= {"name", "value", "valueFrom"},
                f"the task's environment variable {var!r} is not a Kubernetes EnvVar")
    by_name: Dict[str, Mapping[str, Any]] = {}
    for volume in extras.volumes:  # the same PVC mounted twice comes as two equal volumes
        name = volume.get("name")
        require(k8s.is_dns1123_label(name) and not name.startswith("kfdist-"),
                f"the task's volume name {name!r} is not a DNS-1123 label, or is reserved "
                "(kfdist-*: kfdist's own volumes)")
        require(by_name.setdefault(name, volume) == volume,
                f"the task has two different volumes named {name!r}")
    names = list(by_name)
    for mount in extras.volume_mounts:
        require(mount.get("name") in names and isinstance(mount.get("mountPath"), str)
                and posixpath.isabs(mount["mountPath"]),
                f"the task's volume mount {mount!r} needs an absolute mountPath and one of the "
                f"task's volumes {names}")
    return dataclasses.replace(extras, volumes=tuple(by_name.values()))
