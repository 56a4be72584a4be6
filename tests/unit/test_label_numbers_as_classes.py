"""Integer labels of TFRecord and IDX sources that are not 0..k-1 become classes 0..k-1.

scikit-learn's wine (178 rows, 3 cultivars) is written to TFRecord files here with its
classes numbered 3, 5 and 9. The shard step, under the local runner and under Beam alike,
makes them class ids 0, 1, 2 named "3", "5", "9" (the same records, the same metadata): a
model trained on the dataset has 3 outputs, not 10, its evaluation scores 3 classes and its
serving signature names each prediction by its number. Labels that are 0..k-1 stay their
own ids with no names; a negative label is refused as before.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import numpy as np
import pytest
import sklearn.datasets

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec as ds
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.common.serving_inputs import input_name
from kfdist.components.evaluate_model.runtime import evaluate
from kfdist.components.export_saved_model.runtime import export
from kfdist.components.shard_dataset import runtime
from kfdist.components.shard_dataset.validation import DataAnomalyError

from fakes.model_fixture import build_model_artifact
from fakes.source_files import read_split, synthetic_digits, write_idx_pair

NUMBERS = {0: 9, 1: 3, 2: 5}  # barolo 9, grignolino 3, barbera 5


def write_wine_tfrecords(directory, numbers=NUMBERS, files: int = 2) -> str:
    """scikit-learn's wine as TFRecord files of `tf.train.Example`s (`x`: 13 floats, `label`:
    the cultivar's number), rows dealt round the files."""
    import tensorflow as tf

    frame = sklearn.datasets.load_wine(as_frame=True).frame
    features = frame.drop(columns="target").to_numpy("float32")
    os.makedirs(directory, exist_ok=True)
    writers = [tf.io.TFRecordWriter(os.path.join(directory, f"wine-{i}.tfrecord"))
               for i in range(files)]
    for row, (x, y) in enumerate(zip(features, frame["target"])):
        writers[row % files].write(tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[numbers[int(y)]])),
        })).SerializeToString())
    for writer in writers:
        writer.close()
    return str(directory)


def records(root: str, meta, split: str) -> collections.Counter:
    import tensorflow as tf

    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(
        meta.shard_paths(root, split)))


def examples(root: str, meta) -> collections.Counter:
    """Every example of both splits as `(its features, its class's name)`."""
    names = ds.display_class_names(meta)
    out = collections.Counter()
    for split in ("train", "eval"):
        inputs, labels = read_split(root, meta, split)
        out.update((x.tobytes(), names[y]) for x, y in zip(inputs, labels))
    return out


@pytest.fixture(scope="module")
def wine(tmp_path_factory):
    """`(source, local dataset, its metadata, Beam dataset, its metadata)`."""
    root = tmp_path_factory.mktemp("wine")
    source = write_wine_tfrecords(root / "source")
    kwargs = dict(num_shards=2, log=lambda line: None)
    local = runtime.shard(source, str(root / "local"), **kwargs)
    beam = runtime.shard(source, str(root / "beam"), runner="beam",
                         beam_options=("direct_num_workers=2",), **kwargs)
    return source, str(root / "local"), local, str(root / "beam"), beam


def test_the_numbers_become_classes_named_by_them_under_both_runners(wine):
    source, local_dir, local, beam_dir, beam = wine
    assert local.num_classes == 3 and local.class_names == ("3", "5", "9")
    counts = [a + b for a, b in zip(local.class_counts["train"], local.class_counts["eval"])]
    assert counts == [71, 48, 59]  # grignolino (3), barbera (5), barolo (9)
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    want = collections.Counter(
        (x.tobytes(), str(NUMBERS[int(y)]))
        for x, y in zip(frame.drop(columns="target").to_numpy("float32"), frame["target"]))
    assert examples(local_dir, local) == want  # each example keeps its class, by its number
    assert dataclasses.replace(beam, splits=local.splits) == local  # the same metadata
    for split in ("train", "eval"):  # and the same records
        assert records(beam_dir, beam, split) == records(local_dir, local, split)


def test_a_model_has_one_output_per_class_and_its_signature_names_them(wine, tmp_path):
    import tensorflow as tf

    _, dataset_dir, meta, _, _ = wine
    model_dir = build_model_artifact(dataset_dir, str(tmp_path / "model"), epochs=20)
    model = tf.keras.models.load_model(os.path.join(model_dir, "saved_model"))
    assert model.output_shape == (None, 3)
    result = evaluate(model_dir, dataset_dir, accuracy_threshold=0.8, log=lambda line: None)
    assert result.class_names == ["3", "5", "9"] and len(result.confusion_matrix) == 3
    assert result.blessed, result.reason
    exported = export(model_dir, str(tmp_path / "serving"), serving_model_name="wine",
                      blessed=True, log=lambda line: None)
    inputs, labels = read_split(dataset_dir, meta, "eval")
    served = tf.saved_model.load(exported.path).signatures["serving_default"]
    out = served(**{input_name(c): tf.constant(inputs[:, i])
                    for i, c in enumerate(meta.feature.columns)})
    names = [n.decode() for n in out["class_names"].numpy()]
    assert set(names) == {"3", "5", "9"}
    assert names == [meta.class_names[i] for i in out["class_ids"].numpy()]


def test_labels_that_are_0_to_k_stay_their_own_ids(tmp_path):
    ids = runtime.shard(write_wine_tfrecords(tmp_path / "ids", {0: 0, 1: 1, 2: 2}),
                        str(tmp_path / "out"), num_shards=2, log=lambda line: None)
    assert ids.num_classes == 3 and ids.class_names is None
    images, digits = synthetic_digits(300)
    write_idx_pair(str(tmp_path / "idx"), images, digits)
    mnist = runtime.shard(str(tmp_path / "idx"), str(tmp_path / "mnist"), num_shards=2,
                          log=lambda line: None)
    assert mnist.num_classes == 10 and mnist.class_names is None


def test_idx_labels_other_than_0_to_k_are_renumbered_too(tmp_path):
    images, digits = synthetic_digits(300)
    odd = (2 * digits + 1).astype(np.uint8)  # 1, 3, ..., 19
    write_idx_pair(str(tmp_path / "idx"), images, odd)
    meta = runtime.shard(str(tmp_path / "idx"), str(tmp_path / "out"), num_shards=2,
                         log=lambda line: None)
    assert meta.num_classes == 10
    assert meta.class_names == tuple(str(n) for n in range(1, 20, 2))
    train_images, train_ids = read_split(str(tmp_path / "out"), meta, "train")
    by_image = {x.tobytes(): int(y) for x, y in zip(images, odd)}
    assert all(by_image[x.astype(np.uint8).tobytes()] == 2 * y + 1
               for x, y in zip(train_images, train_ids))


def test_a_class_missing_against_the_reference_is_named_by_its_number(wine, tmp_path):
    _, reference, _, _, _ = wine
    lines = []
    later = write_wine_tfrecords(tmp_path / "later", {0: 3, 1: 3, 2: 5})  # no 9
    with pytest.raises(DataAnomalyError, match="^1 anomaly"):
        runtime.shard(later, str(tmp_path / "out"), num_shards=2, log=lines.append,
                      reference_dataset=reference)
    assert [line for line in lines if line.startswith("anomaly: ")] == [
        "anomaly: label 'label': 1 class(es) of the reference missing from this data: '9' "
        "(59 rows) in the reference; a model trained on it cannot predict them"]


def test_a_negative_label_is_still_refused(tmp_path):
    source = write_wine_tfrecords(tmp_path / "neg", {0: -1, 1: 3, 2: 5})
    with pytest.raises(InvalidInputError, match=r"^label -1 in 'wine-\d.tfrecord' is not a "
                                                r"class id"):
        runtime.shard(source, str(tmp_path / "out"), log=lambda line: None)
    assert not (tmp_path / "out").exists()
