"""The checks of a `ClusterJobSpec`: everything the cluster would refuse or never run.

`validate_cluster_job` runs before any API call (through
`ClusterJobSpec.validate`) and raises `InvalidInputError` naming the first bad
value and what would be valid: replica layout against strategy and backend,
names against what the operators derive from them, image pinning, resources,
storage, scheduling and run policy.
"""

from __future__ import annotations

from typing import Optional

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_parts import (
    ReplicaOverride, Resources, check_env, check_labels, check_string_map)
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.kubernetes.build.job_spec import (
    MPI_IMPLEMENTATIONS, REPLICA_TYPES, RESERVED_ENV, ClusterJobSpec)

MPIJOB_BACKEND = strategy_rules.MPIJOB_BACKEND


def validate_cluster_job(spec: ClusterJobSpec) -> None:
    """Checks every field of `spec` and their combinations.

    Args:
      spec: The job description.

    Raises:
      InvalidInputError: Naming the first bad value and what would be valid.
    """
    _check_shape(spec)
    _check_names(spec)
    _check_containers(spec)
    _check_scheduling(spec)


def _check_shape(spec: ClusterJobSpec) -> None:
    """The layout by the rules every backend shares, then what only a cluster needs."""
    backends = strategy_rules.CLUSTER_BACKENDS
    require(spec.backend in backends,
            f"a cluster job needs backend {' or '.join(backends)}, got {spec.backend!r}")
    spec.layout.validate(spec.strategy)
    if spec.backend == strategy_rules.TRAINJOB_BACKEND:
        from kfdist.components.train_distributed.kubernetes.build import trainjob_runtime

        trainjob_runtime.check_fits_runtime(spec)
    elif spec.backend == MPIJOB_BACKEND:
        impl = spec.mpi_implementation
        require(impl is None or impl in MPI_IMPLEMENTATIONS,
                f"unknown mpi_implementation {impl!r}; valid: {list(MPI_IMPLEMENTATIONS)}")
        require(bool(spec.command), "an mpijob needs a command: the program every MPI rank runs")
    else:
        for field in ("mpi_implementation", "ssh_auth_mount_path"):
            require(getattr(spec, field) is None,
                    f"{field}={getattr(spec, field)!r} applies to backend 'mpijob' only, not 'tfjob'")


def check_job_name(name: str) -> None:
    """Raises `InvalidInputError` unless `name` is a DNS-1035 label: the DNS-1123 label the
    operators also need to name the job's Services after it (so starting with a letter)."""
    require(k8s.is_dns1035_label(name), f"job name {name!r} is not a DNS-1035 label: "
            "at most 63 lower-case letters, digits or '-', starting with a letter, ending alphanumeric")


def _check_names(spec: ClusterJobSpec) -> None:
    check_job_name(spec.name)
    longest = spec.longest_pod_hostname()
    require(len(longest) <= k8s.DNS_LABEL_MAX,
            f"job name {spec.name!r} is too long: the operator would name a pod {longest!r} "
            f"({len(longest)} characters, more than {k8s.DNS_LABEL_MAX}); shorten it by "
            f"{len(longest) - k8s.DNS_LABEL_MAX}")
    check_namespace(spec.namespace)
    for what, value in [("service_account", spec.service_account)] + [
            ("image_pull_secrets entry", s) for s in spec.image_pull_secrets]:
        check_object_name(what, value)
    check_labels("labels", spec.labels)
    check_string_map("annotations", spec.annotations, values_are_labels=False)


def check_namespace(namespace: str) -> None:
    """Raises `InvalidInputError` unless `namespace` is a DNS-1123 label."""
    require(k8s.is_dns1123_label(namespace), f"namespace {namespace!r} is not a DNS-1123 label: "
            "at most 63 lower-case letters, digits or '-', starting and ending alphanumeric")


def check_object_name(what: str, value: Optional[str]) -> None:
    """Raises `InvalidInputError` unless `value` is None or a DNS-1123 subdomain (an object's name)."""
    require(value is None or k8s.is_dns1123_subdomain(value),
            f"{what} {value!r} is not a valid name (DNS-1123 subdomain: lower-case letters, "
            "digits, '-' and '.')")


def check_image(image: str) -> None:
    """Raises `InvalidInputError` unless `image` is a pinned image reference."""
    error = k8s.image_error(image)
    require(error is None, f"image {image!r} {error}")


def _check_containers(spec: ClusterJobSpec) -> None:
    check_image(spec.image)
    for what, seq in (("command", spec.command), ("args", spec.args)):
        require(isinstance(seq, tuple) and all(isinstance(s, str) for s in seq),
                f"{what} must be a tuple of strings, got {seq!r}")
    check_env(spec.env, RESERVED_ENV)
    rtypes = REPLICA_TYPES[spec.backend]
    present = spec.replica_counts()
    for rtype, override in spec.overrides.items():
        require(rtype in rtypes, f"override for unknown replica type {rtype!r}; valid for "
                f"{spec.backend}: {list(rtypes)}")
        require(rtype in present, f"override for {rtype!r}, but the job has no {rtype} replicas")
        require(isinstance(override, ReplicaOverride) and (
            override.resources is None or isinstance(override.resources, Resources)),
                f"override for {rtype!r} must be a ReplicaOverride(resources=Resources(...)), "
                f"got {override!r}")
    policies = (strategy_rules.MPI_RESTART_POLICIES if spec.backend == MPIJOB_BACKEND
                else strategy_rules.RESTART_POLICIES)
    for rtype in present:
        spec.resources_for(rtype).validate(f"{rtype} resources")
        policy = spec.restart_policy_for(rtype)
        require(policy in policies, f"restart policy {policy!r} of {rtype} is not valid for "
                f"{spec.backend}; valid: {list(policies)}")
    require(spec.resources_for("Launcher").gpus == 0 or spec.backend != MPIJOB_BACKEND,
            "the MPI launcher gets no GPUs (the operator hides them); request GPUs on workers")
    gpus = spec.resources_for("Worker").gpus
    require(spec.strategy != strategy_rules.HOROVOD or gpus == 0
            or spec.layout.slots_per_worker <= gpus,
            f"slots_per_worker={spec.layout.slots_per_worker} exceeds the {gpus} GPUs per worker "
            "(Horovod runs one process per GPU)")
    paths = [v.mount_path for v in spec.volumes] + [m["mountPath"] for m in spec.extras.volume_mounts]
    require(len(set(paths)) == len(paths), f"two volumes mount at the same path: {paths}")
    for volume in spec.volumes:
        volume.validate()
    require(spec.ssh_auth_mount_path is None or (isinstance(spec.ssh_auth_mount_path, str)
                                                 and spec.ssh_auth_mount_path.startswith("/")),
            f"ssh_auth_mount_path {spec.ssh_auth_mount_path!r} must be an absolute path")


def _check_scheduling(spec: ClusterJobSpec) -> None:
    check_labels("node_selector", spec.node_selector)
    for toleration in spec.tolerations:
        toleration.validate()
    spec.run_policy.validate(total_replicas=sum(spec.replica_counts().values()))
    deadline = spec.layout.active_deadline_seconds
    require(deadline is None or float(deadline).is_integer(),
            f"active_deadline_seconds must be whole seconds on a cluster, got {deadline!r}")
