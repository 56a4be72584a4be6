"""The cluster backends: one training step = one TFJob (`tfjob`), MPIJob (`mpijob`) or TrainJob (`trainjob`).

Order of work, so that bad input never reaches the cluster and a terminated
run leaves nothing behind:

1. build the job description from the step's settings, validate and render
   it (pure; any error names the bad value before a single API call);
2. stage the job (config and, unless it is already in an object store, the dataset)
   at the shared work location (see `job.work_location`);
3. create the job, or re-attach to it when a retried step finds its own job,
   stream the chief's (MPI launcher's) log and wait (`launcher`); SIGTERM or the timeout
   deletes the job; a failed job's error quotes the last log lines of the
   replicas that failed (the step streams only the chief's);
4. copy the chief's model and every replica's report back to the step.

The leader publishes its training state to the work location after every
epoch (`backup_sync`): replicas the operator restarts, and a retried step,
resume from it.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import tempfile
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1, RenderedJob
from kfdist.components.train_distributed.kubernetes.build.job_parts import PvcMount
from kfdist.components.train_distributed.kubernetes.build.job_spec import (
    RESERVED_ENV, ClusterJobSpec, job_name_for, run_labels)
from kfdist.components.train_distributed.kubernetes.build.object_store_env import (
    replica_object_store_env)
from kfdist.components.train_distributed.kubernetes.build.render_mpijob import render_mpijob
from kfdist.components.train_distributed.kubernetes.build.render_tfjob import render_tfjob
from kfdist.components.train_distributed.kubernetes.build.render_trainjob import (
    RUNTIME_PATCHES, customisation_from_schema, render_trainjob)
from kfdist.components.train_distributed.kubernetes.client import kube_errors
from kfdist.components.train_distributed.job.work_location import SharedJobLayout, replica_command

#: Used for the job name when the step runs outside a KFP run (e.g. from a notebook).
DEFAULT_RUN_ID = "manual"
DEFAULT_TASK_NAME = "train-distributed"
KUEUE_TFJOB_WARNING = (
    "warning: queue_name is set on a TFJob, but Kueue (v0.19 and later) leaves its "
    "kubeflow.org/tfjob integration off by default and deprecates it: unless your Kueue's "
    "integrations.frameworks lists kubeflow.org/tfjob, the TFJob is not queued and starts at "
    "once. Use backend trainjob (or mpijob for horovod), which Kueue manages by default")


def resolve_namespace(options: ClusterOptions) -> str:
    """The job's namespace: the option, else the step pod's own namespace.

    Raises:
      InvalidInputError: If neither is known.
    """
    from kfdist.components.train_distributed.kubernetes.client.pod_identity import own_namespace

    namespace = options.namespace or own_namespace()
    if not namespace:
        raise InvalidInputError("the job's namespace is unknown outside a cluster: pass namespace")
    return namespace


def resolve_work_uri(options: ClusterOptions, dataset_uri: Optional[str], job_name: str) -> str:
    """Where the step and the replicas exchange files (see `job.work_location`).

    The option wins; otherwise, when the dataset artifact lives in an object store
    (`gs://`, `s3://`, `minio://`),
    a folder beside it named after the job.

    Raises:
      InvalidInputError: If there is no shared location to use.
    """
    if options.work_uri:
        if not storage.is_remote(options.work_uri) and not options.pvc_name:
            raise InvalidInputError(
                f"work_uri {options.work_uri!r} is a path, which the replicas can only share "
                "through a volume: pass pvc_name as well, or use a gs://, s3:// or "
                "minio:// work_uri")
        mount = options.pvc_mount_path.rstrip("/") + "/"
        if not storage.is_remote(options.work_uri) and not options.work_uri.startswith(mount):
            raise InvalidInputError(
                f"work_uri {options.work_uri!r} is not on the PVC {options.pvc_name!r}, which "
                f"the replicas mount at {options.pvc_mount_path}: use a path under {mount}")
        return options.work_uri
    if dataset_uri and storage.is_remote(dataset_uri):
        return posixpath.join(posixpath.dirname(dataset_uri.rstrip("/")), job_name)
    where = (f"is at {dataset_uri!r}, not in an object store" if dataset_uri
             else "location is not known")
    raise InvalidInputError(
        f"no shared location for the replicas (the dataset {where}): pass work_uri "
        "(gs://BUCKET/PREFIX, s3://BUCKET/PREFIX, or a path on the PVC named by pvc_name)")


def job_place(options: ClusterOptions, dataset_uri: Optional[str],
              job_name: str) -> Tuple[str, str]:
    """The job's namespace (`resolve_namespace`) and work location (`resolve_work_uri`).

    Raises:
      InvalidInputError: Naming, in one message, every one of the two that is missing or
        unusable, so that one correction makes the job.
    """
    found: List[str] = []
    problems: List[str] = []
    for resolve in (lambda: resolve_namespace(options),
                    lambda: resolve_work_uri(options, dataset_uri, job_name)):
        try:
            found.append(resolve())
        except InvalidInputError as err:
            problems.append(str(err))
    if problems:
        raise InvalidInputError("; ".join(problems))
    return found[0], found[1]


def build_job_spec(job: config.JobConfig, options: ClusterOptions, *, name: str,
                   namespace: str, work_uri: str, dataset_uri: Optional[str] = None,
                   environ: Optional[Mapping[str, str]] = None) -> ClusterJobSpec:
    """The cluster job description of a training step (pure).

    All-reduce workers each upload their report after training, which the
    step reads: with the operator's default success policy the job would be
    Succeeded (and, cleanPodPolicy Running, the other workers' pods deleted)
    as soon as worker 0 exits, racing those uploads, so those jobs use
    `AllWorkers` (`strategy_rules.default_success_policy`). What the KFP task
    passed on joins kfdist's settings as `task_settings` says. When the work location or
    the dataset is on S3, every replica gets the store's configuration from `environ` (the
    step's) and its keys from `options.object_store_secret` (`object_store_env`).
    """
    volumes = ((PvcMount(claim_name=options.pvc_name, mount_path=options.pvc_mount_path),)
               if options.pvc_name else ())
    run_id = options.run_id or DEFAULT_RUN_ID
    task_name = options.task_name or DEFAULT_TASK_NAME
    image = options.image_for(job.training.strategy)
    from kfdist import HOROVOD_IMAGE_SSH_DIR
    from kfdist.images import image as kfdist_image

    mpi = job.job.backend == strategy_rules.MPIJOB_BACKEND  # a TrainJob's runtime mounts the keys
    extras = options.task.replica_extras(RESERVED_ENV, [v.mount_path for v in volumes])
    store_env, store_refs = replica_object_store_env(
        options.object_store_secret, (work_uri, dataset_uri), environ or {}, extras.env_names)
    return ClusterJobSpec(
        name=name, namespace=namespace, layout=job.job, strategy=job.training.strategy,
        image=image, command=tuple(replica_command(work_uri)), resources=options.worker_resources(),
        ssh_auth_mount_path=HOROVOD_IMAGE_SSH_DIR if mpi and image == kfdist_image("horovod") else None,
        node_selector=options.replica_node_selector(), tolerations=options.task.tolerations,
        env=store_env, env_refs=store_refs, volumes=volumes, extras=extras,
        service_account=options.service_account, labels=job_labels(options, run_id, task_name))


def queue_warning(backend: str, options: ClusterOptions) -> Optional[str]:
    """What to tell a user who queues a job Kueue will not hold (a TFJob), else None."""
    if options.queue_name and backend == strategy_rules.TFJOB_BACKEND:
        return KUEUE_TFJOB_WARNING
    return None


def job_labels(options: ClusterOptions, run_id: str, task_name: str) -> Dict[str, str]:
    """The run labels, and Kueue's queue label when the job goes to a queue."""
    from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import QUEUE_NAME_LABEL

    labels = run_labels(run_id, task_name)
    if options.queue_name:
        labels[QUEUE_NAME_LABEL] = options.queue_name
    return labels


def render_step_job(job: config.JobConfig, options: ClusterOptions,
                    dataset_uri: Optional[str], customisation: str = RUNTIME_PATCHES, *,
                    name: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                    ) -> "tuple[RenderedJob, SharedJobLayout]":
    """Validates and renders the step's job and its work location; no API call.

    Args:
      job: The validated job.
      options: The step's cluster settings.
      dataset_uri: The dataset artifact's URI (read in place when remote).
      customisation: For a TrainJob, the installed Trainer's pod-customisation field.
      name: The job's name; default the step's own, from the run and task (`job_name_for`).
      environ: The step's environment, whose S3 endpoint and region the replicas get; default
        this process's.

    Raises:
      InvalidInputError: Naming the first bad setting.
    """
    name = name or job_name_for(options.run_id or DEFAULT_RUN_ID,
                                options.task_name or DEFAULT_TASK_NAME)
    namespace, work_uri = job_place(options, dataset_uri, name)
    layout = SharedJobLayout(work_uri)
    spec = build_job_spec(job, options, name=name, namespace=namespace, work_uri=layout.work_uri,
                          dataset_uri=dataset_uri,
                          environ=os.environ if environ is None else environ)
    if spec.backend == strategy_rules.TRAINJOB_BACKEND:
        return render_trainjob(spec, customisation), layout
    render = render_mpijob if spec.backend == strategy_rules.MPIJOB_BACKEND else render_tfjob
    return render(spec), layout


def stage_job(job: config.JobConfig, layout: SharedJobLayout, dataset_uri: Optional[str]) -> None:
    """Writes the job config, and the dataset unless the replicas can read it in place."""
    if dataset_uri and storage.is_remote(dataset_uri):
        data_location = dataset_uri
    else:
        data_location = layout.dataset_uri
        storage.copy_dir_to(job.dataset_dir, data_location)
    template = dataclasses.replace(job, dataset_dir=data_location, model_dir="model",
                                   work_dir="reports", dump_weights=False)
    with tempfile.TemporaryDirectory(prefix="kfdist-stage-") as tmp:
        path = os.path.join(tmp, "job.json")
        template.write(path)
        storage.upload_file(path, layout.job_file)


def run_job(job: config.JobConfig, options: ClusterOptions, log: Callable[[str], None], *,
            dataset_uri: Optional[str] = None, api=None) -> int:
    """Runs `job` as a TFJob, MPIJob or TrainJob; leaves its outputs in `job.model_dir` and `job.work_dir`.

    Args:
      job: The validated job; its dirs are the step's local directories.
      options: The step's cluster settings.
      log: Receives progress and the chief's log lines.
      dataset_uri: The dataset artifact's URI (read in place when remote).
      api: A `kube_api.KubeApi`; by default from the in-cluster config or kubeconfig.

    Returns:
      How often replicas were restarted (pods re-created, containers restarted).

    Raises:
      InvalidInputError: A bad setting (before any API call or upload).
      TrainingFailedError: The job failed or timed out (and was deleted).
      KubeApiError: The operator is not installed, or RBAC denied a call.
    """
    rendered, layout = render_step_job(job, options, dataset_uri)
    from kfdist.components.train_distributed.kubernetes.client import kfp_task, kube_api
    from kfdist.components.train_distributed.kubernetes.lifecycle import launcher
    from kfdist.components.train_distributed.kubernetes.lifecycle import failed_replicas, step_signals

    api = api or kube_api.KubeApi.from_environment()
    named = kfp_task.with_own_task(options, api)
    if named is not options:  # a pipeline of the user's own passed no run id: the step's own
        options = named
        rendered, layout = render_step_job(job, options, dataset_uri)
    backend = job.job.backend
    if backend == strategy_rules.TRAINJOB_BACKEND:
        customisation = trainer_customisation(api, log)
        if customisation != RUNTIME_PATCHES:
            rendered, layout = render_step_job(job, options, dataset_uri, customisation)
    log(f"{backend} backend: {rendered.kind.kind} {rendered.namespace}/{rendered.name}, "
        f"work location {layout.work_uri}")
    warning = queue_warning(backend, options)
    if warning:
        log(warning)
    if storage.exists(layout.job_file):
        # A retried step: the work location is unique to this run and task, so what the
        # first attempt staged is this very job; rewriting it could disturb replicas
        # that are reading it right now.
        log(f"{backend} backend: {layout.job_file} is already staged (retried step); reusing it")
    else:
        stage_job(job, layout, dataset_uri)
    with step_signals.cancel_on_sigterm(), failed_replicas.quoted(api, rendered):
        outcome = launcher.launch_and_wait(
            rendered, api, timeout_seconds=options.timeout_seconds or None, log=log,
            owner=api.read_own_pod_reference(), timeout_from=options.timeout_from)
    storage.copy_dir_from(layout.model_uri, job.model_dir)
    storage.copy_dir_from(layout.reports_uri, job.work_dir)
    return outcome.restarts


def trainer_customisation(api, log: Callable[[str], None]) -> str:
    """The pod-customisation field of the cluster's Trainer, read from its TrainJob CRD.

    Raises:
      CrdNotInstalledError: Kubeflow Trainer is not installed.
      InvalidInputError: Its version is not supported.
    """
    kind = TRAINJOB_V1ALPHA1
    try:
        schema = api.read_crd_schema(kind.crd_name, kind.version)
    except kube_errors.NotFoundError:
        raise kube_errors.CrdNotInstalledError(kube_errors.crd_missing_message(kind), 404) from None
    except kube_errors.PermissionDeniedError as error:
        log(f"trainjob backend: cannot read the CRD {kind.crd_name} ({error}); assuming Trainer "
            f"v2.2 or later ({RUNTIME_PATCHES})")
        return RUNTIME_PATCHES
    field = customisation_from_schema(schema)
    log(f"trainjob backend: the cluster's TrainJob CRD has {field}")
    return field
