"""The smaller records of a `ClusterJobSpec`, each with its own checks.

Resources per replica, run policy (with gang scheduling), PVC mounts,
tolerations, per replica type overrides and the pod fields passed on from the
KFP task; plus the checks of label maps and environments that
`ClusterJobSpec.validate` shares.
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s

GPU_RESOURCE = "nvidia.com/gpu"
CLEAN_POD_POLICIES = ("None", "Running", "All")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: Label prefix the operators own: a user label there would be overwritten.
OPERATOR_LABEL_PREFIX = "training.kubeflow.org/"
INT32_MAX = 2 ** 31 - 1


def is_int(value: object) -> bool:
    """Whether `value` is an int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(name: str, value: Optional[int], minimum: int, maximum: int = INT32_MAX) -> None:
    require(value is None or (is_int(value) and minimum <= value <= maximum),
            f"{name} must be an integer from {minimum} to {maximum}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Resources:
    """Compute resources of one replica (a container).

    Attributes:
      cpu: CPU request, e.g. `500m` or `4`.
      memory: Memory request, e.g. `8Gi`.
      cpu_limit: CPU limit; none if unset.
      memory_limit: Memory limit; none if unset.
      gpus: `nvidia.com/gpu` limit (extended resources are requested at their limit).
      accelerators: Limits of other accelerators by resource name (e.g. `amd.com/gpu`);
        like GPUs, only on the replicas that compute.
    """

    cpu: Optional[str] = None
    memory: Optional[str] = None
    cpu_limit: Optional[str] = None
    memory_limit: Optional[str] = None
    gpus: int = 0
    accelerators: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def without_gpus(self) -> "Resources":
        """The same resources with no GPUs or other accelerators."""
        return dataclasses.replace(self, gpus=0, accelerators={})

    def validate(self, where: str) -> None:
        """Checks quantity syntax, positivity and request <= limit.

        Args:
          where: What these resources belong to, for messages (`Worker resources`).
        """
        _check_int(f"{where}: gpus", self.gpus, 0)
        for name, count in self.accelerators.items():
            require(name != GPU_RESOURCE and "/" in name and k8s.label_key_error(name) is None,
                    f"{where}: accelerator {name!r} is not an extended resource name such as "
                    f"'amd.com/gpu' (GPUs: {GPU_RESOURCE})")
            _check_int(f"{where}: {name}", count, 1)
        parsed = {}
        for field in ("cpu", "memory", "cpu_limit", "memory_limit"):
            value = getattr(self, field)
            if value is None:
                continue
            quantity = k8s.parse_quantity(value)
            require(quantity is not None and quantity > 0,
                    f"{where}: {field} {value!r} is not a positive Kubernetes quantity "
                    "(e.g. '500m' or '2' for CPU, '512Mi' or '8Gi' for memory)")
            parsed[field] = quantity
        for kind in ("cpu", "memory"):
            request, limit = parsed.get(kind), parsed.get(f"{kind}_limit")
            require(request is None or limit is None or request <= limit,
                    f"{where}: {kind} request {getattr(self, kind)!r} exceeds its limit "
                    f"{getattr(self, kind + '_limit')!r}")


@dataclasses.dataclass(frozen=True)
class SchedulingPolicy:
    """Gang scheduling (Volcano or scheduler-plugins): all replicas start together or none.

    Attributes:
      min_available: Replicas that must be schedulable at once; default all.
      queue: Scheduler queue.
      priority_class: PriorityClass of the pod group.
      schedule_timeout_seconds: How long the group may wait to be scheduled.
    """

    min_available: Optional[int] = None
    queue: Optional[str] = None
    priority_class: Optional[str] = None
    schedule_timeout_seconds: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class RunPolicy:
    """How the operator runs and cleans up the job (`spec.runPolicy`).

    Attributes:
      clean_pod_policy: Pods deleted when the job ends: `Running` (default:
        lingering parameter servers and idle workers, keeping finished pods'
        logs), `All` or `None`.
      ttl_seconds_after_finished: Delete the job this long after it ends.
      scheduling_policy: Gang scheduling settings.

    The backoff limit and the deadline are the job layout's (`config.JobSpec`).
    """

    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: Optional[int] = None
    scheduling_policy: Optional[SchedulingPolicy] = None

    def validate(self, total_replicas: int) -> None:
        """Checks each field; `min_available` against the job's replicas."""
        require(self.clean_pod_policy in CLEAN_POD_POLICIES,
                f"clean_pod_policy {self.clean_pod_policy!r} is not valid; valid: {list(CLEAN_POD_POLICIES)}")
        _check_int("ttl_seconds_after_finished", self.ttl_seconds_after_finished, 0)
        policy = self.scheduling_policy
        if policy is None:
            return
        _check_int("scheduling_policy.min_available", policy.min_available, 1, total_replicas)
        _check_int("scheduling_policy.schedule_timeout_seconds", policy.schedule_timeout_seconds, 1)
        require(policy.queue is None or (isinstance(policy.queue, str) and bool(policy.queue)),
                f"scheduling_policy.queue must be a non-empty string, got {policy.queue!r}")
        require(policy.priority_class is None or k8s.is_dns1123_subdomain(policy.priority_class),
                f"scheduling_policy.priority_class {policy.priority_class!r} is not a valid "
                "PriorityClass name")


@dataclasses.dataclass(frozen=True)
class PvcMount:
    """A PersistentVolumeClaim mounted into every replica.

    Attributes:
      claim_name: Name of the PVC (in the job's namespace).
      mount_path: Absolute path in the container.
      read_only: Mount read-only.
      sub_path: Relative path inside the volume to mount instead of its root.
    """

    claim_name: str
    mount_path: str
    read_only: bool = False
    sub_path: Optional[str] = None

    def validate(self) -> None:
        """Checks the claim name and the paths."""
        require(k8s.is_dns1123_subdomain(self.claim_name),
                f"PVC claim name {self.claim_name!r} is not a valid name (DNS-1123 subdomain)")
        require(isinstance(self.mount_path, str) and posixpath.isabs(self.mount_path)
                and ":" not in self.mount_path,
                f"mount path {self.mount_path!r} of PVC {self.claim_name!r} must be an absolute path")
        sub = self.sub_path
        require(sub is None or (isinstance(sub, str) and bool(sub) and not posixpath.isabs(sub)
                                and ".." not in sub.split("/")),
                f"sub_path {sub!r} of PVC {self.claim_name!r} must be a relative path without '..'")


@dataclasses.dataclass(frozen=True)
class Toleration:
    """A taint every replica tolerates (e.g. a GPU node pool's).

    Attributes:
      key: Taint key; None with operator `Exists` tolerates every taint.
      operator: `Equal` or `Exists`.
      value: Taint value (`Equal` only).
      effect: `NoSchedule`, `PreferNoSchedule`, `NoExecute`, or None for all.
      toleration_seconds: How long a `NoExecute` taint is tolerated.
    """

    key: Optional[str] = None
    operator: str = "Equal"
    value: Optional[str] = None
    effect: Optional[str] = None
    toleration_seconds: Optional[int] = None

    def validate(self) -> None:
        """Checks the operator/value/effect combination and the key syntax."""
        require(self.operator in TOLERATION_OPERATORS,
                f"toleration operator {self.operator!r} is not valid; valid: {list(TOLERATION_OPERATORS)}")
        require(self.key is None or k8s.label_key_error(self.key) is None,
                f"toleration key {self.key!r} is not a valid key: {k8s.label_key_error(self.key)}")
        require(self.key is not None or self.operator == "Exists",
                "a toleration without a key must use operator 'Exists'")
        require(self.operator == "Equal" or self.value is None,
                f"toleration {self.key!r} with operator 'Exists' must have no value, got {self.value!r}")
        require(self.value is None or k8s.is_label_value(self.value),
                f"toleration value {self.value!r} is not a valid label value")
        require(self.effect is None or self.effect in TAINT_EFFECTS,
                f"toleration effect {self.effect!r} is not valid; valid: {list(TAINT_EFFECTS)} or None")
        require(self.toleration_seconds is None or self.effect == "NoExecute",
                "toleration_seconds applies to effect 'NoExecute' only")
        _check_int("toleration_seconds", self.toleration_seconds, 0, 2 ** 63 - 1)


@dataclasses.dataclass(frozen=True)
class ReplicaOverride:
    """Settings of one replica type that differ from the job-wide ones.

    Attributes:
      resources: Resources of each replica of that type.
      restart_policy: Restart policy of that type.
    """

    resources: Optional[Resources] = None
    restart_policy: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class PodExtras:
    """Fields of every replica's pod kept as Kubernetes spells them: what the pipeline author set
    on the KFP task beyond kfdist's own settings (`kubernetes.task_settings` checks them).

    Attributes:
      affinity: The pods' `affinity`.
      env: `env` entries of the replica container (`name` with `value` or `valueFrom`), after
        kfdist's own.
      volumes: Pod `volumes` (PVCs, Secrets, ConfigMaps), after kfdist's own.
      volume_mounts: The replica container's `volumeMounts` of those volumes.
    """

    affinity: Optional[Mapping[str, Any]] = None
    env: Tuple[Mapping[str, Any], ...] = ()
    volumes: Tuple[Mapping[str, Any], ...] = ()
    volume_mounts: Tuple[Mapping[str, Any], ...] = ()

    @property
    def env_names(self) -> List[str]:
        """The names of `env`, in order."""
        return [e["name"] for e in self.env]


def check_string_map(what: str, mapping: Mapping[str, str], values_are_labels: bool) -> None:
    """Checks that `mapping` has valid label-style keys and string values."""
    require(isinstance(mapping, Mapping), f"{what} must be a mapping, got {mapping!r}")
    for key, value in mapping.items():
        error = k8s.label_key_error(key)
        require(error is None, f"{what} key {key!r} is not valid: {error}")
        require(isinstance(value, str), f"{what}[{key!r}] must be a string, got {value!r}")
        require(not values_are_labels or k8s.is_label_value(value),
                f"{what}[{key!r}] value {value!r} is not a valid label value: at most 63 "
                "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric")


def check_labels(what: str, labels: Mapping[str, str]) -> None:
    """Checks label syntax, and that no label is one the operators own."""
    check_string_map(what, labels, values_are_labels=True)
    for key in labels:
        require(not key.startswith(OPERATOR_LABEL_PREFIX),
                f"{what} key {key!r} is reserved: the operators set {OPERATOR_LABEL_PREFIX}* labels")


def check_env(env: Mapping[str, str], reserved: Sequence[str]) -> None:
    """Checks environment variable names and values, and that none is reserved."""
    require(isinstance(env, Mapping), f"env must be a mapping, got {env!r}")
    for name, value in env.items():
        require(k8s.is_env_name(name), f"environment variable name {name!r} is not valid: letters, "
                "digits, '_', '-' or '.', not starting with a digit")
        require(name not in reserved, f"environment variable {name!r} is set by kfdist or the "
                f"operator; reserved: {list(reserved)}")
        require(isinstance(value, str), f"environment variable {name!r} must be a string, got {value!r}")
