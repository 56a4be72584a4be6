"""The `local` backend: the job's replicas as processes on this machine.

Each replica is `python -u -m kfdist.components.train_distributed.replica`,
given the TF_CONFIG the Training Operator would inject (ports on localhost,
picked by binding port 0; none for a single replica), legacy Keras, and the
launcher's `sys.path` as PYTHONPATH so user model modules import the same way
in the replicas as in the launcher.

Every output line of a replica goes to `log` as it arrives, prefixed with
`[worker-i] `. When a replica fails, the others are terminated and
`TrainingFailedError` names the replica, its exit code and its last lines.
Whatever happens (failure, an exception in `log`, SIGTERM, Ctrl-C), no
replica outlives `run_job`; the kernel also ends a replica whose launcher is
killed (see `supervisor`). Nor do their temporary files: the replicas' TMPDIR
is a directory of the job's own, removed after it (TensorFlow's AutoGraph
leaves the modules it generates in the temporary directory of a replica that
is stopped).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Callable, Dict, Optional, Sequence, Tuple

from kfdist.components.common import own_env
from kfdist.components.train_distributed.job import config, strategy_rules, tf_config
from kfdist.components.train_distributed.job import work_files
from kfdist.components.train_distributed.local.ports import PortReservation
from kfdist.components.train_distributed.local.supervisor import (LAUNCHER, LocalJobResult,
                                                                  Supervisor)

REPLICA_MODULE = "kfdist.components.train_distributed.replica"


def replica_pythonpath() -> str:
    """The launcher's import path as a PYTHONPATH value (the current directory made absolute)."""
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    return os.pathsep.join(dict.fromkeys(entries))


def replica_env(tf_config_value: Optional[dict], temp_dir: str) -> Dict[str, str]:
    """The environment of one replica process, its temporary files in `temp_dir`."""
    env = dict(os.environ)
    env.pop(tf_config.TF_CONFIG_ENV, None)
    if tf_config_value is not None:
        env[tf_config.TF_CONFIG_ENV] = tf_config.to_env_value(tf_config_value)
    own_env.use_own_env(env)  # kfdist's own replica; its models need tf-keras whatever was set
    env.update({own_env.LEGACY_KERAS_ENV: own_env.OWN_ENV[own_env.LEGACY_KERAS_ENV],
                "PYTHONUNBUFFERED": "1", "TMPDIR": temp_dir,
                "PYTHONPATH": replica_pythonpath(), work_files.LAUNCHER_PID_ENV: str(os.getpid())})
    return env


def local_cluster(spec: config.JobSpec, strategy: str, ports: Sequence[int]) -> tf_config.Cluster:
    """The job's cluster on localhost: `spec.replica_counts(strategy)` replicas, one port each."""
    counts = spec.replica_counts(strategy)
    free = iter(ports)
    return tf_config.build_cluster({t: [f"localhost:{next(free)}" for _ in range(n)]
                                    for t, n in counts.items()})


def run_job(job: config.JobConfig, config_path: str, log: Callable[[str], None]) -> LocalJobResult:
    """Runs the job's replicas locally until the job succeeds or fails, as the operators would.

    TensorFlow strategies: one process per replica of `job.job.replica_counts`,
    each with the TF_CONFIG the Training Operator injects. Horovod: one
    `mpirun` (the MPIJob launcher) over `workers x slots_per_worker` ranks,
    with the environment the MPI Operator gives its launcher. A replica that
    exits non-zero is restarted or fails the job per the restart policy and
    backoff limit; the job succeeds when the chief does (worker 0 without a
    chief, every worker under `AllWorkers`, the launcher under Horovod), and
    replicas still running then (PS, evaluator) are ended.

    Args:
      job: The validated job.
      config_path: Where `job` is written as JSON (passed to every replica).
      log: Receives every replica output line, prefixed `[worker-i] ` (`[rank-r] `).

    Returns:
      The restarts made and the replicas ended at the end.

    Raises:
      TrainingFailedError: If the job failed (the replicas are stopped first).
    """
    spec, strategy = job.job, job.training.strategy
    argv = [sys.executable, "-u", "-m", REPLICA_MODULE, "--config", config_path]
    reservation = None
    temp_dir = tempfile.mkdtemp(prefix="kfdist-replicas-")
    try:
        if strategy == strategy_rules.HOROVOD:
            from kfdist.components.train_distributed.local import local_mpi

            launcher_argv, launcher_env = local_mpi.launcher(spec, argv, job.work_dir,
                                                             replica_env(None, temp_dir))
            replicas = [(tf_config.Task(LAUNCHER, 0), launcher_argv, launcher_env)]
        else:
            reservation = PortReservation(sum(spec.replica_counts(strategy).values()))
            cluster = local_cluster(spec, strategy, reservation.ports)
            replicas = [(task, argv, replica_env(value, temp_dir))
                        for task, value in tf_config.tf_configs(cluster)]
        return run_processes(replicas, spec, strategy, log)
    finally:
        if reservation is not None:
            reservation.release()
        shutil.rmtree(temp_dir, ignore_errors=True)


def run_processes(replicas: Sequence[Tuple[tf_config.Task, Sequence[str], Dict[str, str]]],
                  spec: config.JobSpec, strategy: str,
                  log: Callable[[str], None]) -> LocalJobResult:
    """Runs replica processes under the operators' rules until the job succeeds or fails.

    Args:
      replicas: `(task, argv, env)` of each replica (task `launcher` for Horovod).
      spec: Restart policy, backoff limit, deadline and success policy.
      strategy: Decides which replicas' success is the job's.
      log: Receives every output line, prefixed with the replica's label.

    Returns:
      The restarts made and the replicas ended at the end.

    Raises:
      TrainingFailedError: If the job failed (every replica is stopped first).
      StepCancelled: On SIGTERM or SIGINT (every replica is stopped first).
    """
    supervisor = Supervisor(log, spec, strategy)
    for task, argv, env in replicas:
        supervisor.add(task, argv, env)
    return supervisor.run()
