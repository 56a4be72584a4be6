"""A plain distributed TensorFlow program, as the seeds write one: `TF_CONFIG` and a strategy.

    TF_CONFIG=... python plain_distributed.py STRATEGY DATASET EPOCHS BATCH RESULT_JSON \
        STEPS_PER_EXECUTION INPUT

Run by `peer_distributed` in every process of the layout. It trains kfdist's `mnist_mlp` on the
train shards of a kfdist dataset with `STEPS_PER_EXECUTION` steps per call of the train function.
`INPUT` is `records` (as TensorFlow's tutorials write it: every batch read and parsed from the
TFRecords) or `kfdist` (the training step's own input function: the split decoded once into
memory, every epoch a fresh permutation), so that a comparison can match kfdist's settings. The
leader writes to RESULT_JSON each epoch's training seconds, validation seconds and held-out
accuracy, and the times (`time.time()`) the first epoch began and the last one ended.
"""

import json
import os
import sys
import time

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec, tf_features
from kfdist.components.train_distributed.replica import models


def _split(meta, root, name, batch, shuffle):
    parse, preprocess = tf_features.parse_fn(meta), tf_features.preprocess_fn(meta)
    data = tf.data.TFRecordDataset(meta.shard_paths(root, name))
    if shuffle:
        data = data.shuffle(10_000, seed=0)
    data = data.batch(batch, drop_remainder=shuffle).map(parse, tf.data.AUTOTUNE)
    if not shuffle:  # the eval split may be one file: the workers take every other batch
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        data = data.with_options(options)
    return data.map(lambda x, y: (preprocess(x), y)).prefetch(tf.data.AUTOTUNE)


class EpochClock(tf.keras.callbacks.Callback):
    """Each epoch's training seconds (begin to the start of validation) and validation seconds."""

    def __init__(self, evaluate=None):
        super().__init__()
        self.epochs, self.evaluate = [], evaluate

    def on_epoch_begin(self, epoch, logs=None):
        self.started, self.validating = time.perf_counter(), None
        if not self.epochs:
            self.first_begin_unix = time.time()

    def on_test_begin(self, logs=None):
        self.validating = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        if self.evaluate is not None:  # the chief scores the eval split itself
            self.validating, accuracy = now, self.evaluate()
            now = time.perf_counter()
        else:
            accuracy = (logs or {}).get("val_accuracy", 0.0)
        trained = (self.validating or now) - self.started
        self.epochs.append({"seconds": trained, "validation_seconds": now - trained - self.started,
                            "val_accuracy": float(accuracy)})
        self.last_end_unix = time.time()


def _kfdist_input(meta, root, batch, parameter_server):
    """The training step's own input function (`distribute_datasets_from_function`'s)."""
    from kfdist.components.train_distributed.replica import input_pipeline

    return input_pipeline.make_input_fn(meta, root, batch_size_per_replica=batch, seed=0,
                                        per_worker_order=parameter_server)


def main() -> None:
    strategy_name, root, epochs, batch, result, steps_per_execution, input_path = sys.argv[1:8]
    epochs, batch, steps_per_execution = int(epochs), int(batch), int(steps_per_execution)
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    meta = dataset_spec.load_metadata(root)
    workers = len(config["cluster"]["worker"])
    # One pass over the train split per epoch: a step is a batch per worker (all-reduce) or one
    # worker's batch (PS), as the training step counts its steps.
    per_step = batch * (1 if strategy_name == "parameter_server" else workers)
    steps = meta.splits["train"].num_examples // per_step
    if strategy_name == "parameter_server" and task["type"] in ("worker", "ps"):
        tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"],
                             task_index=task["index"], protocol="grpc", start=True).join()
        return
    if strategy_name == "parameter_server":
        strategy = tf.distribute.ParameterServerStrategy(resolver)
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = models.build_model("mnist_mlp", meta)
        models.compile_model(model, 0.001, steps_per_execution=steps_per_execution)
    if strategy_name == "parameter_server":
        def records_fn(context):
            files = tf.data.Dataset.from_tensor_slices(meta.shard_paths(root, "train"))
            files = files.shard(context.num_input_pipelines, context.input_pipeline_id)
            parse, preprocess = tf_features.parse_fn(meta), tf_features.preprocess_fn(meta)
            return (files.interleave(tf.data.TFRecordDataset).shuffle(10_000).repeat()
                    .batch(batch).map(parse).map(lambda x, y: (preprocess(x), y)).prefetch(2))

        dataset_fn = (_kfdist_input(meta, root, batch, parameter_server=True)
                      if input_path == "kfdist" else records_fn)
        evaluation = _split(meta, root, "eval", 1024, shuffle=False)

        def evaluate():
            hits = total = 0
            for x, y in evaluation:
                hits += int(tf.reduce_sum(tf.cast(tf.argmax(model(x), 1) == y, tf.int32)))
                total += int(y.shape[0])
            return hits / total

        clock = EpochClock(evaluate)
        model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=epochs,
                  steps_per_epoch=steps, callbacks=[clock], verbose=0)
    else:
        if input_path == "kfdist":
            train = strategy.distribute_datasets_from_function(
                _kfdist_input(meta, root, batch, parameter_server=False))
        else:
            train = _split(meta, root, "train", batch * workers, shuffle=True).repeat()
        clock = EpochClock()
        model.fit(train, epochs=epochs, steps_per_epoch=steps, callbacks=[clock], verbose=0,
                  validation_data=_split(meta, root, "eval", 1024, shuffle=False))
    if task["type"] == "chief" or (task["type"] == "worker" and task["index"] == 0):
        with open(result, "w") as f:
            json.dump({"epochs": clock.epochs, "steps_per_epoch": steps,
                       "first_epoch_begin_unix": clock.first_begin_unix,
                       "last_epoch_end_unix": clock.last_end_unix}, f)


if __name__ == "__main__":
    main()
