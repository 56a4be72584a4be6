"""A regression's model: one linear unit in the label's units, and its serving signature.

Trained for a few epochs on scikit-learn's diabetes table (real TensorFlow, in process).
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.datasets

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common.errors import InvalidInputError


@pytest.fixture(scope="module")
def diabetes():
    frame = sklearn.datasets.load_diabetes(as_frame=True).frame
    columns = tuple(c for c in frame.columns if c != "target")
    x = frame[list(columns)].to_numpy(np.float32)
    y = frame["target"].to_numpy(np.float32)
    stats = ds.LabelStatistics(mean=float(y.mean()), std=float(y.std()), min=float(y.min()),
                               max=float(y.max()), examples=len(y))
    meta = ds.DatasetMetadata(
        source_uri="diabetes.csv", source_format="csv",
        feature=ds.FeatureSpec(key="features", dtype="float32", shape=(len(columns),),
                               columns=columns), num_classes=0,
        preprocessing=ds.Preprocessing(kind="standardize", mean=tuple(x.mean(0).tolist()),
                                       std=tuple(x.std(0).tolist())),
        compression=None, seed=42, eval_fraction=0.2, splits={}, label_column="target",
        task=ds.REGRESSION, label_statistics={"train": stats})
    return meta, x, y


def test_the_default_model_predicts_in_the_labels_units_and_learns(diabetes):
    import tensorflow as tf

    from kfdist.components.common.tf_features import preprocess_fn
    from kfdist.components.train_distributed.replica import models, regression_head

    meta, x, y = diabetes
    tf.keras.utils.set_random_seed(1)
    model = models.build_model("", meta)
    models.compile_model(model, 0.01, regression=True)
    last = model.layers[-1]
    assert last.name == regression_head.VALUE_LAYER
    assert last.scale == pytest.approx(y.std()) and last.offset == pytest.approx(y.mean())
    inputs = preprocess_fn(meta)(x).numpy()
    assert model(inputs[:4]).shape == (4, 1)
    history = model.fit(inputs, y, epochs=15, batch_size=32, verbose=0).history
    assert set(history) == {"loss", regression_head.RMSE, regression_head.MAE}
    assert history["rmse"][-1] < 0.8 * y.std()  # far better than the mean (RMSE = std)
    predicted = model.predict(inputs, verbose=0).reshape(-1)
    assert abs(predicted.mean() - y.mean()) < 10.0 and predicted.std() > 30.0


def test_the_serving_signature_returns_value_as_the_model_predicts(diabetes):
    import tensorflow as tf

    from kfdist.components.common.serving_model import serving_module
    from kfdist.components.common.tf_features import preprocess_fn
    from kfdist.components.train_distributed.replica import models

    meta, x, _ = diabetes
    model = models.build_model("tabular_mlp", meta)
    module = serving_module(model, meta)
    feed = {c: tf.constant(x[:8, i]) for i, c in enumerate(meta.feature.columns)}
    served = module.serve(feed)
    assert set(served) == {"value"} and served["value"].shape == (8,)
    direct = model(preprocess_fn(meta)(x[:8]), training=False).numpy().reshape(-1)
    np.testing.assert_allclose(served["value"].numpy(), direct, rtol=1e-6)


def test_a_user_model_with_more_than_one_output_is_refused(diabetes, tmp_path, monkeypatch):
    from kfdist.components.train_distributed.replica import models

    (tmp_path / "three_outputs.py").write_text(
        "import tensorflow as tf\n\n\n"
        "def build(shape, num_classes):\n"
        "    return tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=tuple(shape))])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidInputError, match=r"gives outputs of shape \[3\]; a regression's "
                                                r"model ends in one linear unit"):
        models.build_model("three_outputs:build", diabetes[0])
