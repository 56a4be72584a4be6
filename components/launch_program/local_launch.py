"""Runs a program job's replicas as processes on this machine, as the operators would.

Each replica runs the user's command unchanged, in the caller's environment
less anything an operator injects (no stray TF_CONFIG or RANK from the
shell) and less kfdist's own variables (no TF_USE_LEGACY_KERAS that kfdist
set for itself: `own_env`), plus the job's `--env` variables and exactly
what the operator injects with localhost addresses (`operator_env`). The
local supervisor streams every line as `[worker-i]`, applies the restart
policy and backoff limit, decides success as the operators do (chief, else
master, else worker 0) and leaves no process behind on failure, SIGTERM or
Ctrl-C. A failure kfdist knows the cause of says it (`program_failures`).
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable, Dict, Optional

from kfdist.components.common import own_env, storage
from kfdist.components.launch_program import operator_env, program_failures
from kfdist.components.launch_program.program_job import ProgramJob, check_local_command
from kfdist.components.train_distributed.job import config, strategy_rules, tf_config
from kfdist.components.train_distributed.local import local_mpi
from kfdist.components.train_distributed.local.local_backend import run_processes
from kfdist.components.train_distributed.local.ports import PortReservation
from kfdist.components.train_distributed.local.supervisor import LAUNCHER, LocalJobResult


def base_env() -> dict:
    """The caller's environment as the user gave it (`own_env.user_environ`: none of kfdist's
    own variables), without any variable an operator or kfdist injects."""
    return {k: v for k, v in own_env.user_environ().items() if k not in operator_env.INJECTED}


def run_local(job: ProgramJob, log: Callable[[str], None],
              extra_env: Optional[Dict[str, str]] = None,
              wording: program_failures.Wording = program_failures.STEP_LOCAL) -> LocalJobResult:
    """Runs `job` locally until it succeeds or fails.

    Args:
      job: The job; validated here, and its command checked, before anything starts.
      log: Receives every replica line, prefixed `[worker-i] ` (`[master-0] `).
      extra_env: Variables for kfdist's own wrapper of the command (`pod_entry`), if any.
      wording: How the caller's user fixes a failure kfdist knows (`program_failures`).

    Returns:
      The restarts made and the replicas ended at the end (PS, evaluator).

    Raises:
      InvalidInputError: On a bad field or a command that does not exist here.
      TrainingFailedError: If the job failed (naming the replica and its last lines, and what
        the failure is when kfdist knows: `program_failures`).
    """
    job.validate()
    check_local_command(job.command)
    for directory in (job.model_dir, job.checkpoint_dir):
        if not storage.is_remote(directory):
            os.makedirs(directory, exist_ok=True)
    spec = config.JobSpec(backend=strategy_rules.LOCAL_BACKEND, workers=job.workers,
                          slots_per_worker=job.procs_per_worker if job.mpi else 1,
                          restart_policy=job.restart_policy, backoff_limit=job.backoff_limit,
                          active_deadline_seconds=job.active_deadline_seconds,
                          success_policy="")
    with program_failures.explained(wording):
        if job.mpi:
            return _run_mpi(job, spec, log, extra_env or {})
        return _run_replicas(job, spec, log, extra_env or {})


def _run_replicas(job: ProgramJob, spec: config.JobSpec, log: Callable[[str], None],
                  extra_env: Dict[str, str]) -> LocalJobResult:
    """One process per replica, each with the operator's variables on localhost ports."""
    reservation = PortReservation(job.replica_count)
    try:
        addresses = [f"localhost:{port}" for port in reservation.ports]
        base = {**base_env(), **job.env, **extra_env}
        replicas = [(task, list(job.command), {**base, **env})
                    for task, env in operator_env.replica_envs(job, addresses)]
        return run_processes(replicas, spec, strategy_rules.MULTI_WORKER_MIRRORED, log)
    finally:
        reservation.release()


def _run_mpi(job: ProgramJob, spec: config.JobSpec, log: Callable[[str], None],
             extra_env: Dict[str, str]) -> LocalJobResult:
    """An MPI program: one `mpirun` over `workers x procs_per_worker` local ranks, with the
    MPI Operator's launcher environment, supervised as an MPIJob's launcher."""
    with tempfile.TemporaryDirectory(prefix="kfdist-mpi-") as work_dir:
        env = {**base_env(), **job.env, **extra_env, **operator_env.kfdist_env(job)}
        argv, launcher_env = local_mpi.launcher(spec, list(job.command), work_dir, env)
        return run_processes([(tf_config.Task(LAUNCHER, 0), argv, launcher_env)], spec,
                             strategy_rules.HOROVOD, log)
