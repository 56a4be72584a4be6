"""`signature_check.mismatch`: a SavedModel's serving signature against a dataset's feature spec,
on real SavedModels (tf-keras `model.save`, the serving model kfdist builds, a bare module)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import model_artifact as ma
from kfdist.components.common.signature_check import mismatch, signature_inputs


def _keras_saved_model(directory: str, input_shape) -> str:
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input(shape=input_shape, name="pixels"),
                                 tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    model.save(directory, save_format="tf")
    return directory


@pytest.fixture(scope="module")
def digits_meta(digits_dataset) -> ds.DatasetMetadata:
    return ds.load_metadata(digits_dataset)


def test_a_model_built_from_the_dataset_fits(digits_meta, tmp_path):
    saved = _keras_saved_model(str(tmp_path / "m"), ds.model_input_shape(digits_meta))
    assert signature_inputs(saved) == {"pixels": ("float32", (None, 28, 28))}
    assert mismatch(saved, digits_meta) is None


def test_a_model_trained_on_other_data_is_named_with_what_the_dataset_holds(digits_meta,
                                                                           tmp_path):
    saved = _keras_saved_model(str(tmp_path / "m"), (4,))
    assert mismatch(saved, digits_meta) == (
        "the model does not fit the dataset: it takes 'pixels' float32 [batch, 4]; the dataset "
        "holds 28x28 images, fed to the model as float32 [batch, 28, 28] (its recorded "
        "preprocessing applied); build the model's input from the dataset "
        "(kfdist.program.input_shape() is (28, 28))")


def test_a_table_model_must_take_the_one_hot_columns_too(tmp_path):
    table = ds.DatasetMetadata(
        source_uri="cars.csv", source_format="csv",
        feature=ds.FeatureSpec(key=ds.FEATURES_KEY, dtype="float32", shape=(2,),
                               columns=("mpg", "weight"), categorical_columns=("origin",)),
        num_classes=3, preprocessing=ds.Preprocessing(
            kind="standardize", mean=(0.0, 0.0), std=(1.0, 1.0),
            vocabularies=(("usa", "japan", "europe"),)),
        compression=None, seed=0, eval_fraction=0.2, splits={})
    numbers_only = _keras_saved_model(str(tmp_path / "numbers"), (2,))
    message = mismatch(numbers_only, table)
    assert "it takes 'pixels' float32 [batch, 2]; the dataset holds a table of 3 feature " \
           "column(s), fed to the model as float32 [batch, 6]" in message
    assert mismatch(_keras_saved_model(str(tmp_path / "all"), (6,)), table) is None


def test_a_serving_model_is_checked_against_the_raw_inputs(trained_model, digits_meta):
    serving = os.path.join(trained_model, ma.SERVING_MODEL_DIR)
    assert mismatch(serving, digits_meta, served=True) is None
    colour = dataclasses.replace(digits_meta, feature=dataclasses.replace(
        digits_meta.feature, shape=(28, 28, 3)))
    assert mismatch(serving, colour, served=True) == (
        "the model does not fit the dataset: it takes 'image' uint8 [batch, 28, 28]; the "
        "dataset holds 28x28x3 images, served as 'image' uint8 [batch, 28, 28, 3]")


def test_a_saved_model_without_a_serving_signature_is_named(digits_meta, tmp_path):
    import tensorflow as tf

    tf.saved_model.save(tf.Module(), str(tmp_path / "bare"))
    assert mismatch(str(tmp_path / "bare"), digits_meta).startswith(
        f"the SavedModel in {tmp_path / 'bare'} has no 'serving_default' signature to feed; "
        "the dataset holds 28x28 images")
