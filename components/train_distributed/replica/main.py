"""The program every training replica runs, locally and in a cluster pod.

    python -u -m kfdist.components.train_distributed.replica --config JOB.json       # local backend
    python -u -m kfdist.components.train_distributed.replica --work-uri URI          # TFJob / MPIJob pod

It trains (`train.train_replica`) and exits with the code `job.exit_codes`
defines: 0 done, `PEER_LOST` (retryable) when a peer went away mid-collective,
`FAILED` for any other error. The local supervisor and the operators restart
a replica on a retryable code under the `ExitCode` policy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import traceback
import uuid
from typing import Callable, Optional, Sequence

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import process_exit
from kfdist.components.train_distributed.job import config, exit_codes, tf_config
from kfdist.components.train_distributed.replica.outputs import log

#: Errors a replica gets when another replica of its cluster died or restarted.
PEER_LOST_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                    tf.errors.DeadlineExceededError)


def _task_of_this_process() -> tf_config.Task:
    rank = os.environ.get("OMPI_COMM_WORLD_RANK")  # set by OpenMPI's mpirun for every rank
    if rank is not None:
        return tf_config.Task("rank", int(rank))
    return tf_config.current_task(tf_config.parse_env(os.environ))


def exit_code_for(error: BaseException) -> int:
    """The exit code of a replica that raised `error` (see `job.exit_codes`)."""
    if isinstance(error, PEER_LOST_ERRORS):
        return exit_codes.PEER_LOST
    return exit_codes.FAILED


def run_guarded(play: Callable[[], object]) -> int:
    """Runs this replica's part; returns its exit code, logging why it failed."""
    try:
        play()
    except Exception as e:  # noqa: BLE001 -- reported through the log and the exit code
        code = exit_code_for(e)
        task = _task_of_this_process()
        if code == exit_codes.PEER_LOST:
            log(f"replica {task.name} lost a peer ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); exiting with {code} to be restarted")
        else:
            # On stdout, the stream of the line after it: two streams reach a container's log
            # in either order, and the launcher quotes the log's last lines.
            traceback.print_exc(file=sys.stdout)
            log(f"replica {task.name} failed: {type(e).__name__}: {e}")
        return code
    return exit_codes.SUCCEEDED


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one replica; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", help="JobConfig JSON written by the local backend")
    where.add_argument("--work-uri", help="a cluster job's work location (gs://, s3://, "
                       "minio:// or a PVC path)")
    args = parser.parse_args(argv)
    process_exit.skip_final_collection()
    if args.config:
        from kfdist.components.train_distributed.replica.train import train_replica

        return run_guarded(lambda: train_replica(config.JobConfig.read(args.config)))
    from kfdist.components.common import storage
    from kfdist.components.train_distributed.job.work_location import SharedJobLayout
    from kfdist.components.train_distributed.replica.cluster_io import run_shared_replica

    def play() -> None:
        layout = SharedJobLayout(args.work_uri)
        if storage.is_remote(args.work_uri):
            with tempfile.TemporaryDirectory(prefix="kfdist-replica-") as scratch:
                run_shared_replica(layout, scratch)
            return
        # On a PVC the replica's files live on the PVC: under parameter_server the parameter
        # servers save the chief's checkpoint into the chief's directory, which they must reach.
        scratch = os.path.join(args.work_uri, "scratch",
                               f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}")
        os.makedirs(scratch)
        try:
            run_shared_replica(layout, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    return run_guarded(play)
