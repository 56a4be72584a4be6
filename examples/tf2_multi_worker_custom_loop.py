"""A TF2 MultiWorkerMirroredStrategy program with a custom training loop.

The strategy reads TF_CONFIG; every worker runs the loop; the chief saves a
SavedModel into `KFDIST_MODEL_DIR` (the others save to a scratch directory,
as MultiWorkerMirroredStrategy requires every worker to save).
"""

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf  # noqa: E402


def _is_chief() -> bool:
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return task.get("type", "worker") in ("chief", "worker") and task.get("index", 0) == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.SGD(0.1)

    def dataset_fn(context):
        xs = tf.random.stateless_uniform([4096, 1], seed=[context.input_pipeline_id, 1],
                                         minval=-1, maxval=1)
        data = tf.data.Dataset.from_tensor_slices((xs, 3 * xs + 2))
        return data.repeat().batch(context.get_per_replica_batch_size(64))

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step():
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        x, y = next(iterator)
        losses = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    for step in range(1, args.steps + 1):
        loss = train_step()
        if step % 20 == 0:
            print(f"step {step} loss {float(loss):.4f}", flush=True)
    target = os.environ["KFDIST_MODEL_DIR"] if _is_chief() else tempfile.mkdtemp()
    model.save(target)
    print(f"saved SavedModel to {target}", flush=True)


if __name__ == "__main__":
    main()
