"""What your own training program imports to read a kfdist dataset and hand over its model.

`kfdist launch` (and the `train_program` pipeline step) runs your program in
every replica with the operator's environment and three kfdist variables:
`KFDIST_DATA_DIR` (the dataset), `KFDIST_MODEL_DIR` (where the leader writes
its model) and `KFDIST_CHECKPOINT_DIR` (shared, kept across restarts). These
helpers read them. A program that trains on a kfdist dataset with
`dataset()` and saves a Keras SavedModel into `model_dir()` gets its model
evaluated and exported by the pipeline's next steps, exactly as a model of
kfdist's own::

    from kfdist import program
    train = program.dataset("train", batch_size=64).repeat()
    model = build(program.input_shape(), program.num_classes())
    model.fit(train, ...)
    program.save_model(model)

Importing kfdist sets no variable: the program chooses its Keras. `save_model` writes the
SavedModel with either: `model.save(dir)` under tf-keras, which the program selects by setting
`TF_USE_LEGACY_KERAS=1` before it imports TensorFlow (as `examples/keras_fit_backup_restore.py`
does), and `model.export(dir)` under Keras 3, whose `model.save` writes only `.keras` files.
Beside it, `assets.extra/kfdist_outputs.json` records whether the model outputs logits or
probabilities (its last activation), which an export's signature does not say.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Mapping, Optional, Tuple

from kfdist.components.common import dataset_spec, local_copy, storage
from kfdist.components.common.errors import InvalidInputError

DATA_DIR_VAR = "KFDIST_DATA_DIR"
MODEL_DIR_VAR = "KFDIST_MODEL_DIR"
CHECKPOINT_DIR_VAR = "KFDIST_CHECKPOINT_DIR"
#: Where `save_model` records, inside the SavedModel, what the model outputs: {"outputs": ...}.
OUTPUTS_FILE = os.path.join("assets.extra", "kfdist_outputs.json")
OUTPUTS_LOGITS, OUTPUTS_PROBABILITIES = "logits", "probabilities"


def _variable(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise InvalidInputError(f"{name} is not set: run the program with `kfdist launch` (or "
                                "the train_program step), which sets it in every replica")
    return value


def data_dir() -> str:
    """The dataset's directory (`KFDIST_DATA_DIR`)."""
    return _variable(DATA_DIR_VAR)


def model_dir() -> str:
    """Where the leader writes its model (`KFDIST_MODEL_DIR`)."""
    return _variable(MODEL_DIR_VAR)


def checkpoint_dir() -> str:
    """A directory every replica shares, kept across restarts (`KFDIST_CHECKPOINT_DIR`)."""
    return _variable(CHECKPOINT_DIR_VAR)


def is_leader(env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this replica writes the model: the chief, else worker 0 (TF_CONFIG), else rank 0
    (`RANK`; a pod whose processes `torchrun` starts has only `PET_NODE_RANK`), else the lone
    replica.

    Args:
      env: The replica's environment; default this process's.
    """
    env = os.environ if env is None else env
    config = env.get("TF_CONFIG")
    if config:
        task = json.loads(config).get("task", {})
        cluster = json.loads(config).get("cluster", {})
        leader = "chief" if "chief" in cluster else "worker"
        return task.get("type") == leader and int(task.get("index", 0)) == 0
    return int(env.get("RANK", env.get("PET_NODE_RANK", "0"))) == 0


def metadata(directory: Optional[str] = None) -> dataset_spec.DatasetMetadata:
    """The kfdist dataset's metadata: its splits, classes, feature spec and preprocessing.

    Args:
      directory: The dataset; default `KFDIST_DATA_DIR`.

    Raises:
      InvalidInputError: If it is not a kfdist dataset.
    """
    return dataset_spec.load_metadata(_local(directory or data_dir()))


def input_shape(directory: Optional[str] = None) -> Tuple[int, ...]:
    """The shape of one example as `dataset()` yields it (after the recorded preprocessing)."""
    return tuple(dataset_spec.model_input_shape(metadata(directory)))


def num_classes(directory: Optional[str] = None) -> int:
    """The number of classes of the dataset's label."""
    return int(metadata(directory).num_classes)


def dataset(split: str = "train", batch_size: int = 64, directory: Optional[str] = None):
    """One pass over a split as `tf.data` batches of (float32 inputs, int64 labels).

    The inputs are preprocessed as the dataset records (scaling, one-hot
    vocabularies), the same way the evaluate and export steps feed the model.

    Args:
      split: `train` or `eval`.
      batch_size: Examples per batch.
      directory: The dataset; default `KFDIST_DATA_DIR`.

    Raises:
      InvalidInputError: If it is not a kfdist dataset or has no such split.
    """
    from kfdist.components.common import tf_features

    directory = directory or data_dir()
    local = _local(directory)
    meta = metadata(local)
    if split not in meta.splits:
        raise InvalidInputError(f"dataset {directory!r} has no split {split!r}; it has "
                                f"{sorted(meta.splits)}")
    return tf_features.split_batches(meta, local, split, batch_size)


def _local(directory: str) -> str:
    """`directory`, or where it is an object store's URI (a cluster job's dataset, read in
    place), a copy of it on this machine, downloaded once for the job's replicas there."""
    if not storage.is_remote(directory):
        return directory
    return local_copy.machine_copy(directory, "kfdist-program-dataset",
                                   key=os.environ.get(MODEL_DIR_VAR, ""))


def save_model(model, directory: Optional[str] = None) -> str:
    """Saves a Keras model as the SavedModel the evaluate and export steps take, under Keras 3
    (`model.export`) as under tf-keras (`model.save`).

    Every replica calls it: a multi-worker save is a collective. The leader writes into
    `model_dir()` (an object store's URI, where a cluster job's work location is one: saved
    locally, then uploaded there); another replica writes into a temporary directory, removed
    after.

    Args:
      model: The trained Keras model.
      directory: Where the leader writes it; default `KFDIST_MODEL_DIR`.

    Returns:
      Where this replica wrote it (the leader's directory, or a removed temporary one).
    """
    leader = is_leader()
    wanted = (directory or model_dir()) if leader else None
    kept = leader and not storage.is_remote(wanted)
    target = wanted if kept else tempfile.mkdtemp(prefix="kfdist-model-")
    try:
        if _is_keras3(model):
            model.export(target, verbose=False)
        else:
            model.save(target)
        _record_outputs(model, target)
        if leader and not kept:
            storage.upload_dir(target, wanted)
    finally:
        if not kept:
            shutil.rmtree(target, ignore_errors=True)
    return wanted if leader else target


def outputs_kind(model) -> Optional[str]:
    """`logits` when a Keras model's last layer is linear, `probabilities` when it is a softmax
    (an activation or a `Softmax` layer), else None (unknown)."""
    layers = getattr(model, "layers", None)
    if not layers:
        return None
    last = layers[-1]
    if type(last).__name__ == "Softmax":
        return OUTPUTS_PROBABILITIES
    name = getattr(getattr(last, "activation", None), "__name__", None)
    return {"softmax": OUTPUTS_PROBABILITIES, "linear": OUTPUTS_LOGITS}.get(name)


def _record_outputs(model, saved_model_dir: str) -> None:
    """Writes `OUTPUTS_FILE` into the SavedModel when what the model outputs is known."""
    kind = outputs_kind(model)
    if kind is None:
        return
    import tensorflow as tf  # the program's, already imported: its model is built

    path = os.path.join(saved_model_dir, OUTPUTS_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps({"outputs": kind}))


def _is_keras3(model) -> bool:
    """Whether `model` is a Keras 3 model (the `keras` package at version 3 or later)."""
    if "keras" not in {cls.__module__.split(".")[0] for cls in type(model).__mro__}:
        return False  # a tf-keras model (a subclass of one included)
    import keras

    return int(keras.__version__.split(".")[0]) >= 3
