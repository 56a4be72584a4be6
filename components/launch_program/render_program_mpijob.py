"""Renders an MPI `ProgramJob` (Horovod, any MPI program) as an MPIJob (`kubeflow.org/v2beta1`).

What the MPI Operator (v0.8) does with it: a launcher pod runs `mpirun` over `workers x
procs_per_worker` slots (`slotsPerWorker`), reaching the worker pods over SSH with the job's
key pair; a worker container without a command runs `/usr/sbin/sshd -De`; the launcher starts
once every worker is Ready (`WaitForWorkersReady`). The ranks started over SSH do not inherit
the launcher's environment, so `mpirun -x` forwards the KFDIST_* variables, the `--env` ones
and those the KFP task passed on. In kfdist's Horovod image (non-root `mpiuser`, sshd on 2222)
the keys are mounted at `/home/mpiuser/.ssh`. The job succeeds when the launcher does; restart
policies are the launcher Job's: Never or OnFailure.
"""

from __future__ import annotations

import copy
from typing import Any, Dict

from kfdist import HOROVOD_IMAGE_SSH_DIR
from kfdist.images import kfdist_image_name
from kfdist.components.common.errors import require
from kfdist.components.launch_program import operator_env, program_pod
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.launch_program.program_pod import ProgramPlacement
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, JOB_ROLE_LABEL, MPIJOB_V2BETA1, RenderedJob)
from kfdist.components.train_distributed.kubernetes.build.render_mpijob import (
    MPI_CONTAINER_NAME, launcher_command)

def render_program_mpijob(job: ProgramJob, placement: ProgramPlacement) -> RenderedJob:
    """Renders `job` as an MPIJob.

    Args:
      job: An MPI job (`job.mpi`); validated here.
      placement: Name, namespace, image and PVC.

    Returns:
      The MPIJob, its kind, and the selector of its launcher pod.

    Raises:
      InvalidInputError: If `job` is invalid or not an MPI program.
    """
    job.validate()
    require(job.mpi, "an MPIJob runs an MPI program: pass --mpi (Horovod, or any program mpirun "
            "starts)")
    placement.validate()
    env = list(dict.fromkeys([*operator_env.kfdist_env(job), *job.env,
                              *placement.env_names]))
    worker = program_pod.container(job, placement, MPI_CONTAINER_NAME)
    del worker["command"]  # the operator runs sshd
    launcher = copy.deepcopy(worker)
    launcher.pop("resources", None)  # it runs mpirun only; the workers compute
    launcher["command"] = launcher_command(job.workers * job.procs_per_worker, env,
                                           program_pod.command(job, placement))
    specs: Dict[str, Any] = {}
    for rtype, replicas, container in (("Launcher", 1, launcher), ("Worker", job.workers, worker)):
        specs[rtype] = {"replicas": replicas, "restartPolicy": job.restart_policy,
                        "template": {"spec": program_pod.pod_spec(container, placement)}}
    body_spec: Dict[str, Any] = {"slotsPerWorker": job.procs_per_worker,
                                 "launcherCreationPolicy": "WaitForWorkersReady",
                                 "mpiImplementation": "OpenMPI"}
    if kfdist_image_name(placement.image) == "horovod":  # keys in its non-root user's home
        body_spec["sshAuthMountPath"] = HOROVOD_IMAGE_SSH_DIR
    body_spec["runPolicy"] = program_pod.run_policy(job)
    body_spec["mpiReplicaSpecs"] = specs
    body = program_pod.body(MPIJOB_V2BETA1, placement, body_spec)
    selector = {JOB_NAME_LABEL: placement.name, JOB_ROLE_LABEL: "launcher"}
    return RenderedJob(MPIJOB_V2BETA1, placement.name, placement.namespace, body, selector)
