"""KFP interface of `train_distributed`; the work is done by `runtime.train`."""

from kfp import dsl

from kfdist import RUNTIME_IMAGE


@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False)
def train_distributed(
    dataset: dsl.Input[dsl.Dataset],
    model: dsl.Output[dsl.Model],
    metrics: dsl.Output[dsl.Metrics],
    backend: str = "local",
    strategy: str = "multi_worker_mirrored",
    workers: int = 2,
    model_name: str = "mnist_mlp",
    epochs: int = 5,
    batch_size_per_replica: int = 64,
    learning_rate: float = 0.001,
    seed: int = 42,
):
    """Trains a Keras model on a sharded dataset with a distribution strategy.

    The `local` backend starts one process per replica on this machine with the
    TF_CONFIG the Kubeflow Training Operator would inject, and streams each
    replica's log into this step's log with a `[worker-i]` prefix.

    Args:
        dataset: Sharded dataset written by `shard_dataset`.
        model: Output model: `saved_model/` (written by the chief replica only),
            the dataset metadata, per-epoch history and a training report.
        metrics: Final training loss and accuracy, examples per second, workers.
        backend: Where replicas run: `local` (processes on this machine).
        strategy: Distribution strategy: `multi_worker_mirrored` (synchronous
            all-reduce across workers).
        workers: Number of worker replicas (at least 1).
        model_name: `mnist_mlp`, `mnist_cnn`, or your own model as
            `package.module:function`, called as `function(input_shape, num_classes)`
            and returning a tf-keras Model.
        epochs: Passes over the training split.
        batch_size_per_replica: Examples per replica per step; the global batch
            is this times the number of replicas.
        learning_rate: Adam learning rate.
        seed: Seed of weight initialisation and input shuffling.
    """
    from kfdist.components.train_distributed import runtime

    report = runtime.train(
        dataset.path, model.path, backend=backend, strategy=strategy, workers=workers,
        model_name=model_name, epochs=epochs, batch_size_per_replica=batch_size_per_replica,
        learning_rate=learning_rate, seed=seed)
    metrics.log_metric("final_loss", report.final_loss)
    metrics.log_metric("final_accuracy", report.final_accuracy)
    metrics.log_metric("examples_per_second", report.examples_per_second)
    metrics.log_metric("training_seconds", report.wall_seconds)
    metrics.log_metric("workers", report.workers)
    model.metadata.update({"framework": "tensorflow", "strategy": report.strategy,
                           "workers": report.workers, "model_name": report.model_name,
                           "backend": report.backend})
