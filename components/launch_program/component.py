"""KFP interface of `train_program`; the work is done by `program_step.train_program`."""

from typing import Dict, List

from kfp import dsl

from kfdist import RUNTIME_IMAGE
from kfdist.components.train_distributed.component import TASK_CONFIG_PASSTHROUGHS


@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False,
               task_config_passthroughs=TASK_CONFIG_PASSTHROUGHS)
def train_program(
    dataset: dsl.Input[dsl.Dataset],
    model: dsl.Output[dsl.Model],
    metrics: dsl.Output[dsl.Metrics],
    command: List[str],
    framework: str = "tensorflow",
    workers: int = 2,
    ps: int = 0,
    chief: bool = False,
    evaluator: bool = False,
    procs_per_worker: int = 1,
    restart_policy: str = "",
    backoff_limit: int = 6,
    active_deadline_seconds: int = 0,
    mpi: bool = False,
    backend: str = "local",
    stage: bool = False,
    image: str = "",
    namespace: str = "",
    work_uri: str = "",
    pvc_name: str = "",
    gpus_per_worker: int = 0,
    cpu_per_worker: str = "",
    memory_per_worker: str = "",
    node_selector: Dict[str, str] = {},
    service_account: str = "",
    object_store_secret: str = "mlpipeline-minio-artifact",
    timeout_seconds: int = 86400,
    queue_name: str = "",
    timeout_from: str = "creation",
    run_id: str = "",
    task_name: str = "",
    task_config: dsl.TaskConfig = None,
):
    """Trains with your own TensorFlow or PyTorch program instead of kfdist's models.

    Every replica runs `command` unchanged with the environment the Kubeflow
    Training Operator injects (TF_CONFIG; or MASTER_ADDR, MASTER_PORT,
    WORLD_SIZE, RANK and PET_*) and `KFDIST_DATA_DIR` (the dataset),
    `KFDIST_MODEL_DIR` (where the leader saves its Keras SavedModel) and
    `KFDIST_CHECKPOINT_DIR` (shared, kept across restarts); `kfdist.program`
    reads them. The model artifact then holds what `evaluate_model` and
    `export_saved_model` take, as `train_distributed`'s does.

    Args:
        dataset: Sharded dataset written by `shard_dataset` (`KFDIST_DATA_DIR`).
        model: Output model: the program's `saved_model/`, the dataset metadata,
            the serving SavedModel built from them, `checkpoints/` and
            `program_report.json`.
        metrics: The replicas, restarts and wall time of the run.
        command: The program and its arguments, e.g. `["python", "/app/train.py"]`.
        framework: `tensorflow` or `pytorch`.
        workers: TensorFlow worker replicas, or PyTorch nodes (a master and
            `workers - 1` workers).
        ps: TensorFlow parameter servers.
        chief: Add a TensorFlow chief replica.
        evaluator: Add a TensorFlow evaluator replica.
        procs_per_worker: PyTorch processes per node (`PET_NPROC_PER_NODE`).
        restart_policy: What happens to a failed replica: `Never`, `OnFailure`
            or `ExitCode` (restarted when killed or when it lost a peer: exit
            codes 128-255), as the operators define them; empty: `ExitCode`,
            `OnFailure` for an MPI program, and a TrainJob's runtime's policy
            (which it cannot change).
        backoff_limit: Replica restarts allowed before the step fails (a
            TrainJob's is its runtime's, 6).
        active_deadline_seconds: The job fails once it has run this long; 0: no
            deadline.
        mpi: An MPI program (Horovod): one `mpirun` starts `workers x
            procs_per_worker` ranks, as an MPIJob's launcher does.
        backend: Where the replicas run: `local` (processes of this step),
            `tfjob`, `pytorchjob`, `trainjob` (PyTorch on Trainer's
            `torch-distributed`, TensorFlow on kfdist's `kfdist-tensorflow`),
            `mpijob` (with `mpi`), or `auto` (chosen against the cluster).
        stage: Cluster only: the program gets local directories for the
            remote ones (the dataset downloaded, the leader's checkpoints
            uploaded as they change and its model when it succeeds); the image
            must hold kfdist.
        image: Cluster only: the image holding the program (a pinned tag);
            empty: kfdist's runtime image (its Horovod image with `mpi`).
        namespace: Cluster only: namespace of the job (default: this step's).
        work_uri: Cluster only: gs://, s3:// or minio:// prefix or path on the PVC where the
            job's model and checkpoints lie (default: beside a remote
            dataset); the dataset is read in place when remote.
        pvc_name: Cluster only: PersistentVolumeClaim mounted into the replicas
            at /mnt/kfdist (use with a `work_uri` under that path).
        gpus_per_worker: Cluster only: `nvidia.com/gpu` per replica that
            computes (not on a parameter server or an MPI launcher).
        cpu_per_worker: Cluster only: CPU per replica, e.g. `4` or `500m`.
        memory_per_worker: Cluster only: memory per replica, e.g. `8Gi`.
        node_selector: Cluster only: node labels the replicas require.
        service_account: Cluster only: service account of the replica pods.
        object_store_secret: Cluster only: Secret whose keys `accesskey` and
            `secretkey` every replica gets as AWS_ACCESS_KEY_ID and
            AWS_SECRET_ACCESS_KEY (a `secretKeyRef`, optional) when the work location
            or the dataset is on `s3://` or `minio://`, with this step's
            AWS_ENDPOINT_URL(_S3) and AWS_REGION as values; the default is Kubeflow
            Pipelines' own store's. Empty: no keys.
        timeout_seconds: Cluster only: the job is deleted and the step fails
            after this many seconds.
        queue_name: Cluster only: Kueue LocalQueue to submit the job to;
            empty: not queued.
        timeout_from: Cluster only: when `timeout_seconds` starts: `creation`
            or `admission` (by Kueue).
        run_id: The KFP run id (the pipeline passes it); names the job so a
            retried step re-attaches to it.
        task_name: The KFP task name (the pipeline passes it).
        task_config: Filled by KFP, not passed: what this task sets for the replicas of a
            cluster job, as for `train_distributed` (resources, GPUs only on replicas that
            compute, node selector, tolerations, affinity, environment, volumes).
    """
    from kfdist.components.launch_program import program_step
    from kfdist.components.train_distributed.kubernetes import task_settings
    from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

    cluster = ClusterOptions(
        image=image or None, namespace=namespace or None, work_uri=work_uri or None,
        pvc_name=pvc_name or None, gpus_per_worker=gpus_per_worker,
        cpu_per_worker=cpu_per_worker or None, memory_per_worker=memory_per_worker or None,
        node_selector=node_selector, service_account=service_account or None,
        object_store_secret=object_store_secret or None,
        timeout_seconds=timeout_seconds or None, queue_name=queue_name or None,
        timeout_from=timeout_from, run_id=run_id or None, task_name=task_name or None,
        task=task_settings.from_task_config(task_config))
    report = program_step.train_program(
        dataset.path, model.path, command, framework=framework, workers=workers, ps=ps,
        chief=chief, evaluator=evaluator, procs_per_worker=procs_per_worker,
        restart_policy=restart_policy, backoff_limit=backoff_limit,
        active_deadline_seconds=active_deadline_seconds or None, mpi=mpi, backend=backend,
        stage=stage, cluster=cluster, dataset_uri=dataset.uri)
    metrics.log_metric("replicas", report.replicas)
    metrics.log_metric("restarts", report.restarts)
    metrics.log_metric("training_seconds", report.wall_seconds)
    model.metadata.update({"framework": framework, "backend": report.backend,
                           "workers": workers})
