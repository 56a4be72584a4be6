"""A small trained model artifact, built without the trainer component.

`build_model_artifact` writes the `Model` artifact layout of
`components/common/model_artifact.py` from a kfdist dataset: a tf_keras
Flatten → Dense(64) → Dense(softmax) classifier trained for a few epochs on the
preprocessed `train` split, its serving SavedModel, plus dataset_metadata.json (and a table's
dataset_statistics.json), history.json and
training_report.json, as the `trained_model` fixture (registered by tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)


def build_model_artifact(dataset_dir: str, model_dir: str, *, epochs: int = 3, seed: int = 0) -> str:
    """Trains a small classifier on `dataset_dir` and writes a model artifact.

    Args:
      dataset_dir: A local kfdist dataset (see `dataset_spec`).
      model_dir: Directory to create the artifact in.
      epochs: Training epochs.
      seed: Seed for weight initialisation and shuffling.

    Returns:
      `model_dir`.
    """
    import tensorflow as tf

    from kfdist.components.common import dataset_spec as ds
    from kfdist.components.common import dataset_statistics
    from kfdist.components.common import model_artifact as ma
    from kfdist.components.common import serving_model, tf_features

    meta = ds.load_metadata(dataset_dir)
    tf.keras.utils.set_random_seed(seed)
    parse, preprocess = tf_features.parse_fn(meta), tf_features.preprocess_fn(meta)
    train = (tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, "train"),
                                     compression_type=tf_features.compression_type(meta))
             .shuffle(2048, seed=seed).batch(32).map(parse)
             .map(lambda x, y: (preprocess(x), y)))
    model = tf.keras.Sequential([
        tf.keras.layers.Input(shape=meta.feature.shape),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(meta.num_classes, activation="softmax"),
    ])
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    start = time.perf_counter()
    hist = model.fit(train, epochs=epochs, verbose=0)
    wall = time.perf_counter() - start

    os.makedirs(model_dir, exist_ok=True)
    model.save(os.path.join(model_dir, ma.SAVED_MODEL_DIR))
    serving_model.save_serving_model(os.path.join(model_dir, ma.SAVED_MODEL_DIR), meta,
                                     os.path.join(model_dir, ma.SERVING_MODEL_DIR))
    shutil.copyfile(os.path.join(dataset_dir, ds.METADATA_FILE),
                    os.path.join(model_dir, ma.DATASET_METADATA_FILE))
    dataset_statistics.copy_statistics(  # a table's, as the trainer copies them
        dataset_dir, os.path.join(model_dir, ma.DATASET_STATISTICS_FILE))
    losses, accs = hist.history["loss"], hist.history["accuracy"]
    epochs_list = [{"epoch": i + 1, "loss": float(l), "accuracy": float(a)}
                   for i, (l, a) in enumerate(zip(losses, accs))]
    with open(os.path.join(model_dir, ma.HISTORY_FILE), "w") as f:
        json.dump({"epochs": epochs_list}, f, indent=2)
    n_train = meta.splits["train"].num_examples
    report = ma.TrainingReport(
        backend="local", strategy="MirroredStrategy", workers=1, model_name="mnist_mlp",
        epochs=epochs, final_loss=float(losses[-1]), final_accuracy=float(accs[-1]),
        examples_per_second=n_train * epochs / max(wall, 1e-9), wall_seconds=wall,
        replicas=[ma.ReplicaReport(task="worker:0", pid=os.getpid(), num_replicas_in_sync=1,
                                   weights_sha256="0" * 64)])
    with open(os.path.join(model_dir, ma.TRAINING_REPORT_FILE), "w") as f:
        f.write(report.to_json())
    return model_dir


@pytest.fixture(scope="session")
def trained_model(digits_dataset, tmp_path_factory) -> str:
    """A model artifact directory trained for 3 epochs on `digits_dataset`."""
    return build_model_artifact(digits_dataset, str(tmp_path_factory.mktemp("model") / "model"))
