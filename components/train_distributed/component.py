"""KFP interface of `train_distributed`; the work is done by `runtime.train`."""

from typing import Dict

from kfp import dsl

from kfdist import RUNTIME_IMAGE
from kfdist.components.train_distributed.kubernetes.task_settings import PASSTHROUGHS

#: What KFP hands a training step from its task (`task_settings` says what becomes of it).
TASK_CONFIG_PASSTHROUGHS = [dsl.TaskConfigPassthrough(field=dsl.TaskConfigField[name],
                                                      apply_to_task=apply_to_task)
                            for name, apply_to_task in PASSTHROUGHS]


@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False,
               task_config_passthroughs=TASK_CONFIG_PASSTHROUGHS)
def train_distributed(
    dataset: dsl.Input[dsl.Dataset],
    model: dsl.Output[dsl.Model],
    metrics: dsl.Output[dsl.Metrics],
    backend: str = "local",
    strategy: str = "multi_worker_mirrored",
    workers: int = 0,
    model_name: str = "",
    epochs: int = 10,
    batch_size_per_replica: int = 64,
    learning_rate: float = 0.001,
    seed: int = 42,
    ps: int = 0,
    chief: bool = False,
    evaluator: bool = False,
    slots_per_worker: int = 1,
    restart_policy: str = "",
    backoff_limit: int = 6,
    active_deadline_seconds: int = 0,
    input_sharding: str = "auto",
    steps_per_execution: int = 16,
    early_stopping_patience: int = 5,
    validation_fraction: float = 0.1,
    early_stopping_min_delta: float = 0.001,
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
    """Trains a Keras model on a sharded dataset with a distribution strategy.

    With `backend=local` the replicas are processes on this machine, given the
    TF_CONFIG the Kubeflow Training Operator would inject (Horovod: `mpirun`,
    as an MPIJob's launcher). With `backend=tfjob`, `mpijob` or `trainjob` the
    step creates a TFJob, an MPIJob or a Kubeflow Trainer TrainJob (on kfdist's
    runtimes), streams its chief's (launcher's) log here, and fails with the
    operator's reason when the job fails; terminating the run deletes the job. Training backs up after every epoch into the model location: a
    restarted replica, or a retried step, resumes from the last backup.

    Args:
        dataset: Sharded dataset written by `shard_dataset`.
        model: Output model: `saved_model/` (written by the chief replica only),
            the dataset metadata, per-epoch history (loss and accuracy in
            training, on the validation part and on the eval split) and a
            training report; the weights are the kept epoch's.
        metrics: Final training loss and accuracy, the final loss and accuracy
            on the dataset's eval split (`final_val_loss`, `final_val_accuracy`:
            the leader validates after every epoch; absent without an eval
            split; a regression's `final_rmse` and `final_val_rmse` in place
            of the accuracies), examples per second, workers, the input-bound fraction
            (share of step time spent waiting for input), replica restarts and
            the epoch training resumed from; with early stopping, the epoch kept
            (`kept_epoch`), the epochs run (`epochs_run`), whether training
            stopped early (`stopped_early`, 0 or 1) and the kept epoch's loss
            on the validation part (`kept_validation_loss`). The final figures
            are the kept epoch's.
        backend: Where replicas run: `local` (processes on this machine),
            `tfjob` (a TFJob on this cluster), `mpijob` (an MPIJob, Horovod) or
            `trainjob` (a TrainJob on kfdist's Kubeflow Trainer runtimes, any strategy).
        strategy: `mirrored` (one worker, all its devices),
            `multi_worker_mirrored` (synchronous all-reduce across workers),
            `parameter_server` (variables on `ps` servers, asynchronous
            workers, a coordinating chief) or `horovod` (all-reduce over MPI).
        workers: Number of worker replicas; 0: the strategy's default (1 for
            `mirrored`, else 2).
        model_name: `mnist_mlp`, `mnist_cnn`, `image_cnn` (sized to any image),
            `tabular_mlp`, or your own model as `package.module:function`, called
            as `function(input_shape, num_classes)` and returning a tf-keras
            Model; empty (the default): chosen by the data (`mnist_mlp` for
            MNIST's 28x28 images, `image_cnn` for other images, `tabular_mlp` for
            tables).
        epochs: Passes over the training split.
        batch_size_per_replica: Examples per replica per step; the global batch
            is this times the number of replicas. A train split smaller than one
            global batch trains with the largest batch that makes one step (the
            training report's `lowered_batch_size`).
        learning_rate: Adam learning rate.
        seed: Seed of weight initialisation and input shuffling.
        ps: Parameter servers (`parameter_server` only); 0: the strategy's
            default, one under `parameter_server`.
        chief: Add a chief replica to `multi_worker_mirrored` (it trains and
            writes the outputs); `parameter_server` always has one.
        evaluator: Add a side-car evaluator that evaluates each epoch's
            checkpoint on the eval split (not with `horovod`).
        slots_per_worker: `horovod`: MPI ranks per worker (e.g. its GPUs).
        restart_policy: What happens to a failed replica: `Never` (the step
            fails), `OnFailure` (restarted), `ExitCode` (restarted when killed
            or when it lost a peer: exit codes 128-255; `horovod`: `Never` or
            `OnFailure`); empty: the strategy's default, `ExitCode`,
            or `OnFailure` for `horovod` (the MPI Operator's launcher default).
        backoff_limit: Replica restarts allowed before the step fails.
        active_deadline_seconds: The job fails once it has run this long; 0: no
            deadline.
        input_sharding: How workers split the training files: `auto`, `file`
            (whole files per worker; needs at least one file per worker) or
            `record` (every n-th record).
        steps_per_execution: Training steps per call of the compiled train
            function: they run in one TensorFlow loop instead of a Python
            round trip each (small steps train up to a third faster); the
            updates are the same. 1: a call per step, Keras's default.
        early_stopping_patience: Epochs without a lower loss on the validation
            part (by more than early_stopping_min_delta) before training stops;
            the last epoch that lowered it is the one kept (its weights
            restored) and saved. 0: no early stopping: every
            epoch trains on the whole train split and the last one is kept.
        validation_fraction: Share of the train split set aside as the
            validation part that picks the epoch kept (every n-th example by
            position, the same in every run and under every strategy); the
            held-out eval split is never used to choose.
        early_stopping_min_delta: How far below the best loss on the
            validation part an epoch's must be to count as lower (Keras's
            `min_delta`): a small, easy validation part's loss creeps towards
            zero for many epochs after the held-out loss has turned. 0: any
            lower loss counts.
        image: Cluster only: image of the replicas (kfdist installed; a pinned
            tag); empty: this release's kfdist runtime image, or its Horovod
            image for `horovod`.
        namespace: Cluster only: namespace of the job (default: this step's).
        work_uri: Cluster only: gs://, s3:// or minio:// prefix or shared-volume directory where
            this step and the replicas exchange job, dataset and model (default:
            beside the dataset when the pipeline root is remote).
        pvc_name: Cluster only: PersistentVolumeClaim mounted into the replicas
            at /mnt/kfdist (use with a `work_uri` under that path).
        gpus_per_worker: Cluster only: `nvidia.com/gpu` per worker (0 for CPU).
        cpu_per_worker: Cluster only: CPU per worker, e.g. `4` or `500m`.
        memory_per_worker: Cluster only: memory per worker, e.g. `8Gi`.
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
        queue_name: Cluster only: Kueue LocalQueue to submit the job to (label
            `kueue.x-k8s.io/queue-name`; Kueue holds the job suspended until it
            admits it); empty: not queued.
        timeout_from: Cluster only: when `timeout_seconds` starts: `creation`
            (time in the queue counts) or `admission` (by Kueue).
        run_id: The KFP run id (the pipeline passes it); names the job so a
            retried step re-attaches to it.
        task_name: The KFP task name (the pipeline passes it).
        task_config: Filled by KFP, not passed: the resources (e.g. `set_accelerator_limit`),
            node selector, tolerations, affinity, environment and volumes set on this task
            (`kfp.kubernetes`), which go to every replica of a cluster job, GPUs only to
            those that compute; the cluster parameters above win where both set the same.
            Environment and volumes stay on this step's pod too; the rest does not.
    """
    # Every parameter but the artifacts goes to the runtime, which defines them
    # (`job.step_params`, and `task_config`); 0 and empty strings mean "not set".
    params = {k: v for k, v in locals().items() if k not in ("dataset", "model", "metrics")}
    from kfdist.components.train_distributed import runtime

    report = runtime.train(dataset.path, model.path, dataset_uri=dataset.uri, **params)
    for name, value in report.metric_values().items():
        metrics.log_metric(name, value)
    model.metadata.update({"framework": "tensorflow", "strategy": report.strategy,
                           "workers": report.workers, "model_name": report.model_name,
                           "backend": report.backend})
