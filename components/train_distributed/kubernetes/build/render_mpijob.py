"""Renders a Horovod `ClusterJobSpec` as an MPIJob.

`kubeflow.org/v2beta1` (MPI Operator v0.8), the default:

* A `Launcher` (one batch Job `<job>-launcher`, whose pod has hostname
  `<job>-launcher`) runs `mpirun`, which reaches the `Worker` pods
  (`<job>-worker-<i>`) over SSH with keys from the Secret `<job>-ssh`, mounted
  at `sshAuthMountPath` (`/root/.ssh` by default; `/home/mpiuser/.ssh` for a
  non-root image such as kfdist's Horovod image).
* A worker container with neither command nor args runs `/usr/sbin/sshd -De`:
  kfdist leaves both empty. The operator uses the first container of each pod.
* `launcherCreationPolicy: WaitForWorkersReady` starts the launcher only
  when every worker is Ready, so `mpirun` does not race the workers' sshd.
* Pods are labelled `training.kubeflow.org/job-name`, `.../job-role`
  (`launcher` or `worker`), `.../operator-name: mpi-operator`, and workers
  `.../replica-index`; there is no replica-type label.
* runPolicy's backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished
  go to the launcher's batch Job (backoffLimit defaults to the Job's 6).
  Only restart policies `Never` and `OnFailure` pass the operator's validation.
* On failure the `Failed` condition carries the launcher Job's reason, e.g.
  `BackoffLimitExceeded/<pod reason>`, and message (with the last failed
  launcher pod's message), or reason `MPIJobEvicted`.

`kubeflow.org/v1` (Training Operator v1.9): the launcher is a plain pod
`<job>-launcher` that reaches the workers with `kubectl exec` (the operator
gives it a service account `<job>-launcher` allowed to exec, unless one is
set: kfdist never sets one there), workers without a command run
`sleep 365d`, `mainContainer` names the container to exec into, and pods are
labelled with `.../replica-type` (`launcher`, `worker`) instead of job-role.
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, JOB_ROLE_LABEL, MPIJOB_V1, MPIJOB_V2BETA1, REPLICA_TYPE_LABEL, RenderedJob)
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.kubernetes.build.job_spec import ClusterJobSpec
from kfdist.components.train_distributed.kubernetes.build.pod_template import (
    job_metadata, pod_template, render_run_policy)

MPI_API_VERSIONS = ("v2beta1", "v1")
#: The container name (the Training Operator's default for v1; any name works for v2beta1).
MPI_CONTAINER_NAME = "mpi"
#: Commands that already are an MPI launcher: used as they are.
MPI_LAUNCHERS = ("mpirun", "mpiexec", "horovodrun")
#: Variables every rank needs from the launcher's environment besides the job's own.
FORWARDED_ENV = ("PATH", "LD_LIBRARY_PATH")


def mpirun_command(spec: ClusterJobSpec) -> List[str]:
    """The launcher's command: `mpirun` over every slot, running `spec.command`.

    Ranks started over SSH do not inherit the launcher container's environment,
    so the job's variables, those the KFP task passed on, and PATH and
    LD_LIBRARY_PATH are forwarded explicitly.

    Args:
      spec: A validated mpijob.

    Returns:
      `spec.command` itself if it starts with an MPI launcher, else `mpirun`
      with `workers * slots_per_worker` processes followed by it.
    """
    if posixpath.basename(spec.command[0]) in MPI_LAUNCHERS:
        return list(spec.command)
    return launcher_command(spec.layout.workers * spec.layout.slots_per_worker,
                            spec.env_names, list(spec.command),
                            spec.mpi_implementation or "OpenMPI")


def launcher_command(processes: int, env_names: List[str], command: List[str],
                     implementation: str = "OpenMPI") -> List[str]:
    """`mpirun` over `processes` ranks running `command`, forwarding `env_names` (and PATH,
    LD_LIBRARY_PATH) to the ranks it starts over SSH."""
    names = list(FORWARDED_ENV) + list(env_names)
    if implementation == "OpenMPI":
        forward = [arg for name in names for arg in ("-x", name)]
        return (["mpirun", "-np", str(processes), "--allow-run-as-root", "-bind-to", "none",
                 "-map-by", "slot", "-mca", "pml", "ob1", "-mca", "btl", "^openib"]
                + forward + command)
    return ["mpirun", "-n", str(processes), "-genvlist", ",".join(names)] + command


def mpijob_log_pod_selector(spec: ClusterJobSpec, api_version: str) -> Dict[str, str]:
    """Labels of the launcher pod, whose log is `mpirun`'s (every rank's output)."""
    if api_version == "v1":
        return {JOB_NAME_LABEL: spec.name, REPLICA_TYPE_LABEL: "launcher"}
    return {JOB_NAME_LABEL: spec.name, JOB_ROLE_LABEL: "launcher"}


def render_mpijob(spec: ClusterJobSpec, api_version: str = "v2beta1") -> RenderedJob:
    """Renders `spec` as an MPIJob.

    Args:
      spec: A job with backend `mpijob` (strategy `horovod`); validated here.
      api_version: `v2beta1` (MPI Operator) or `v1` (Training Operator).

    Returns:
      The MPIJob, its kind, and the selector of its launcher pod.

    Raises:
      InvalidInputError: If `spec` is invalid, not an mpijob, or uses a
        setting `api_version` does not have.
    """
    require(api_version in MPI_API_VERSIONS,
            f"unknown MPIJob API version {api_version!r}; valid: {list(MPI_API_VERSIONS)}")
    spec.validate()
    require(spec.backend == strategy_rules.MPIJOB_BACKEND, f"render_mpijob needs backend 'mpijob', got {spec.backend!r}")
    v1 = api_version == "v1"
    if v1:
        require(spec.ssh_auth_mount_path is None, "ssh_auth_mount_path applies to MPIJob v2beta1 only: "
                "the v1 launcher reaches workers with kubectl exec, not SSH")
        require(spec.mpi_implementation in (None, "OpenMPI", "Intel"),
                f"mpi_implementation {spec.mpi_implementation!r} is not supported by MPIJob v1; "
                "valid: ['OpenMPI', 'Intel']")
    launcher = pod_template(spec, "Launcher", MPI_CONTAINER_NAME, command=mpirun_command(spec),
                            args=spec.args, service_account=None if v1 else spec.service_account)
    worker = pod_template(spec, "Worker", MPI_CONTAINER_NAME, service_account=spec.service_account)
    replica_specs = {
        rtype: {"replicas": n, "restartPolicy": spec.restart_policy_for(rtype), "template": template}
        for (rtype, n), template in zip(spec.replica_counts().items(), (launcher, worker))
    }
    body_spec: Dict[str, Any] = {"slotsPerWorker": spec.layout.slots_per_worker}
    if v1:
        body_spec["mainContainer"] = MPI_CONTAINER_NAME
    else:
        body_spec["launcherCreationPolicy"] = "WaitForWorkersReady"
        body_spec["mpiImplementation"] = spec.mpi_implementation or "OpenMPI"
        if spec.ssh_auth_mount_path is not None:
            body_spec["sshAuthMountPath"] = spec.ssh_auth_mount_path
    body_spec["runPolicy"] = render_run_policy(spec)
    body_spec["mpiReplicaSpecs"] = replica_specs
    kind = MPIJOB_V1 if v1 else MPIJOB_V2BETA1
    body = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": job_metadata(spec),
            "spec": body_spec}
    return RenderedJob(kind=kind, name=spec.name, namespace=spec.namespace, body=body,
                       log_pod_selector=mpijob_log_pod_selector(spec, api_version))
