"""The `mnist` pipeline: shard → distributed training → evaluate → export.

The same compiled pipeline runs on a laptop through kfp.local (`kfdist run
mnist`) and on a Kubeflow Pipelines cluster; only the training backend differs.
"""

from typing import Dict, NamedTuple

from kfp import dsl

from kfdist.pipelines import step_pods

from kfdist.components.evaluate_model.component import evaluate_model
from kfdist.components.export_saved_model.component import export_saved_model
from kfdist.components.shard_dataset.component import shard_dataset
from kfdist.components.train_distributed.component import train_distributed

PIPELINE_NAME = "mnist"


@dsl.pipeline(
    name="kfdist-mnist",
    description="Shards MNIST-format data, trains a Keras model with a distribution "
                "strategy, evaluates it on a held-out split and exports it for TF Serving "
                "when it reaches the accuracy threshold.",
)
def mnist_pipeline(
    source_uri: str,
    export_base: str,
    backend: str = "local",
    strategy: str = "multi_worker_mirrored",
    workers: int = 0,
    model_name: str = "mnist_mlp",
    epochs: int = 10,
    batch_size_per_replica: int = 64,
    learning_rate: float = 0.001,
    num_shards: int = 4,
    eval_fraction: float = 0.2,
    accuracy_threshold: float = 0.9,
    serving_model_name: str = "mnist",
    seed: int = 42,
    source_version: str = "",
    ps: int = 0,
    chief: bool = False,
    evaluator: bool = False,
    slots_per_worker: int = 1,
    restart_policy: str = "",
    backoff_limit: int = 6,
    image: str = "",
    namespace: str = "",
    work_uri: str = "",
    pvc_name: str = "",
    gpus_per_worker: int = 0,
    cpu_per_worker: str = "",
    memory_per_worker: str = "",
    node_selector: Dict[str, str] = {},
    service_account: str = "",
    timeout_seconds: int = 86400,
) -> NamedTuple("MnistOutputs", [("blessed", bool), ("evaluation_metrics", dsl.Metrics),
                                 ("training_metrics", dsl.Metrics)]):
    """Shard, train, evaluate and, when the model is blessed, export an MNIST classifier.

    The export task runs under `dsl.If(blessed)`: an unblessed model's run
    shows it skipped. Only the shard task is cached (keyed by its parameters
    and `source_version`); training, evaluation and export always run.

    Args:
        source_uri: Directory (local or gs://) of MNIST IDX files
            (`*-images-idx3-ubyte.gz` and `*-labels-idx1-ubyte.gz`).
        export_base: Where to write the TF Serving layout `<export_base>/<serving_model_name>/<version>/`.
        backend: Training backend: `local` runs the replicas as processes on the
            step's machine; `tfjob` creates a TFJob, `mpijob` an MPIJob (Horovod)
            on the cluster.
        strategy: `mirrored`, `multi_worker_mirrored`, `parameter_server` or `horovod`.
        workers: Number of training workers; 0: the strategy's default (1 for `mirrored`, else 2).
        model_name: `mnist_mlp`, `mnist_cnn` or `package.module:function`.
        epochs: Training epochs.
        batch_size_per_replica: Examples per replica per step.
        learning_rate: Adam learning rate.
        num_shards: Train shards written by the shard step.
        eval_fraction: Share of examples held out for evaluation.
        accuracy_threshold: Held-out accuracy needed to export the model.
        serving_model_name: Model name in the serving layout.
        seed: Seed for shuffling, shard assignment and initialisation.
        source_version: Identifies the content of `source_uri` (a dataset
            version or a hash); it only takes part in the shard task's cache
            key, so a cached dataset is reused only for the same data.
            `kfdist run` sets it from the files' names, sizes and times.
        ps: Parameter servers (`parameter_server` only); 0: the strategy's
            default (one under `parameter_server`).
        chief: Add a chief replica to `multi_worker_mirrored`.
        evaluator: Add a side-car evaluator replica (not with `horovod`).
        slots_per_worker: `horovod`: MPI ranks per worker.
        restart_policy: `Never`, `OnFailure` or `ExitCode` (restart killed
            replicas); empty: the strategy's default (`ExitCode`; `OnFailure`
            for `horovod`, as the MPI Operator's launcher).
        backoff_limit: Replica restarts allowed before training fails.
        image: Cluster backends: image of the training replicas (empty: kfdist's
            runtime image for `tfjob`, its Horovod image for `mpijob`).
        namespace: Cluster backends: namespace of the job (default: the step's).
        work_uri: Cluster backends: `gs://` prefix or shared-volume path where
            the step and the replicas exchange job, dataset and model.
        pvc_name: Cluster backends: PVC mounted into the replicas at /mnt/kfdist.
        gpus_per_worker: Cluster backends: `nvidia.com/gpu` per worker.
        cpu_per_worker: Cluster backends: CPU per worker, e.g. `4`.
        memory_per_worker: Cluster backends: memory per worker, e.g. `8Gi`.
        node_selector: Cluster backends: node labels the replicas require.
        service_account: Cluster backends: service account of the replica pods.
        timeout_seconds: Cluster backends: deadline of the training job.

    Empty strings (and `ps=0`) mean "not set": kfp's local runner cannot pass
    None as a pipeline parameter.
    """
    from collections import namedtuple

    shard = shard_dataset(source_uri=source_uri, source_format="mnist_idx",
                          num_shards=num_shards, eval_fraction=eval_fraction, seed=seed,
                          source_version=source_version)
    train = train_distributed(
        dataset=shard.outputs["dataset"], backend=backend, strategy=strategy, workers=workers,
        model_name=model_name, epochs=epochs, batch_size_per_replica=batch_size_per_replica,
        learning_rate=learning_rate, seed=seed, ps=ps, chief=chief, evaluator=evaluator,
        slots_per_worker=slots_per_worker, restart_policy=restart_policy,
        backoff_limit=backoff_limit, image=image, namespace=namespace,
        work_uri=work_uri, pvc_name=pvc_name, gpus_per_worker=gpus_per_worker,
        cpu_per_worker=cpu_per_worker, memory_per_worker=memory_per_worker,
        node_selector=node_selector, service_account=service_account,
        timeout_seconds=timeout_seconds, run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER)
    evaluate = evaluate_model(model=train.outputs["model"], dataset=shard.outputs["dataset"],
                              accuracy_threshold=accuracy_threshold)
    with dsl.If(evaluate.outputs["Output"] == True, name="blessed"):  # noqa: E712 (a DSL condition)
        export = export_saved_model(model=train.outputs["model"],
                                    blessing=evaluate.outputs["blessing"],
                                    export_base=export_base, serving_model_name=serving_model_name)
    step_pods.configure(shard=shard, train=train, evaluate=evaluate, export=export)
    outputs = namedtuple("MnistOutputs", ["blessed", "evaluation_metrics", "training_metrics"])
    return outputs(evaluate.outputs["Output"], evaluate.outputs["metrics"], train.outputs["metrics"])
