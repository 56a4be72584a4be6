"""`train_program` on a cluster backend: the user's program as a TFJob, PyTorchJob, MPIJob or
TrainJob created by the pipeline step.

The step and the replicas meet at the work location, as `train_distributed`'s do
(`job.work_location`): beside a remote dataset artifact by default, or `work_uri` (a remote
prefix, or a path on the PVC `pvc_name`). The replicas read the dataset in place when it is on
`gs://` (else the step copies it to `<work>/dataset`), the leader writes its model into
`<work>/model` and every replica shares `<work>/checkpoints`; with `stage`, kfdist's entry gives
the program local directories for them (`staging`). The job is named after the KFP run and task,
so a retried step re-attaches to it, and its checkpoints outlive it. Once it succeeded, the step
copies `<work>/model` into the Model artifact.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional

from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.components.launch_program import pod_entry, program_cluster, program_pod, staging
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.train_distributed.job.strategy_rules import HOROVOD, MULTI_WORKER_MIRRORED
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

#: The task name of a job launched outside a KFP run (a notebook, a test).
DEFAULT_TASK_NAME = "train-program"


def run_on_cluster(job: ProgramJob, backend: str, options: ClusterOptions, *,
                   dataset_dir: str, dataset_uri: Optional[str], saved_model_dir: str,
                   stage: bool, log: Callable[[str], None]) -> int:
    """Runs `job` as a cluster job and copies the leader's model into `saved_model_dir`.

    Args:
      job: The program job; its directories are replaced by the work location's.
      backend: `tfjob`, `pytorchjob`, `trainjob` or `mpijob`.
      options: The step's cluster settings.
      dataset_dir: The dataset as the step sees it (copied to the work location unless the
        replicas can read `dataset_uri` in place).
      dataset_uri: The dataset artifact's URI.
      saved_model_dir: Where the leader's model lands in the Model artifact.
      stage: Give the program local directories for the remote ones.
      log: Receives progress and the leader's log lines.

    Returns:
      How often replicas were restarted.

    Raises:
      InvalidInputError: A bad setting, named before any API call or upload.
      TrainingFailedError: The job failed or timed out (it was deleted), or left no model.
    """
    from kfdist.components.train_distributed.kubernetes.client import kfp_task, kube_api

    options.validate()
    job.validate()
    program_cluster.check_backend(job, backend)
    placed, in_place, placement = _placed(job, options, dataset_uri, stage)
    program_cluster.render(placed, backend, placement)  # every check before the first API call
    api = kube_api.KubeApi.from_environment()
    named = kfp_task.with_own_task(options, api)
    if named is not options:  # a pipeline of the user's own passed no run id: the step's own
        placed, in_place, placement = _placed(job, named, dataset_uri, stage)
    job, data = placed, placed.data_dir
    rendered = program_cluster.render(job, backend, placement,
                                      program_cluster.customisation_for(backend, api, log))
    if not in_place:
        storage.copy_dir_to(dataset_dir, data)
    outcome = program_cluster.follow(rendered, api, timeout_seconds=options.timeout_seconds,
                                     log=log, timeout_from=options.timeout_from)
    try:
        storage.copy_dir_from(job.model_dir, saved_model_dir)
    except InvalidInputError:
        raise TrainingFailedError(
            f"the program succeeded but its leader wrote nothing into KFDIST_MODEL_DIR "
            f"({job.model_dir})") from None
    log(f"train_program: copied the model from {job.model_dir}; checkpoints stay in "
        f"{job.checkpoint_dir}")
    return outcome.restarts


def _placed(job: ProgramJob, options: ClusterOptions, dataset_uri: Optional[str], stage: bool):
    """(the job on its work location, whether the replicas read the dataset in place, its
    placement) for the run and task `options` name."""
    from kfdist.components.train_distributed.kubernetes import backend as cluster_backend
    from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for

    run_id = options.run_id or cluster_backend.DEFAULT_RUN_ID
    task_name = options.task_name or DEFAULT_TASK_NAME
    name = job_name_for(run_id, task_name)
    work = cluster_backend.resolve_work_uri(options, dataset_uri, name)
    in_place = bool(dataset_uri) and storage.is_remote(dataset_uri)
    data = dataset_uri if in_place else storage.join(work, "dataset")
    job = dataclasses.replace(job, model_dir=storage.join(work, "model"),
                              checkpoint_dir=storage.join(work, "checkpoints"), data_dir=data)
    if stage:
        job = dataclasses.replace(job, command=tuple(pod_entry.entry_command(
            "python", ["--stage", f"{staging.DEFAULT_SYNC_SECONDS:g}"], list(job.command))))
    image = options.image_for(HOROVOD if job.mpi else MULTI_WORKER_MIRRORED)
    placement = program_pod.placement_for(name, image, options)
    placement = dataclasses.replace(
        placement, namespace=cluster_backend.resolve_namespace(options),
        labels=cluster_backend.job_labels(options, run_id, task_name),
        store_env=program_pod.store_env_for(placement, options, (work, data), os.environ))
    placement.validate()
    return job, in_place, placement
