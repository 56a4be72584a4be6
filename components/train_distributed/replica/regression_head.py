"""A regression's model: one linear output, in the label's units, trained on the MSE.

Every built-in model ends in one linear unit for a regression (`models.build_model`
asks it for one output without a softmax; a user model is given `num_classes=1`
and must end in one linear unit itself). A `Rescaling` layer then maps that
unit to the label's units, `output * std + mean` with the train split's label
figures (`DatasetMetadata.label_statistics`): the network learns a standardised
label, while the model, its loss and metrics, the SavedModel and the serving
signature all speak in the label's units, with nothing to undo after training.
"""

from __future__ import annotations

from typing import Any, Dict, List

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common.dataset_spec import SPLITS, DatasetMetadata
from kfdist.components.common.errors import InvalidInputError

#: The training metrics of a regression, by their Keras names (history, console, report).
RMSE, MAE = "rmse", "mae"
#: The name of the layer that gives the model's output in the label's units.
VALUE_LAYER = "value"


def label_scale(meta: DatasetMetadata) -> "tuple[float, float]":
    """`(std, mean)` of the train split's labels (a constant label: std 1)."""
    stats = (meta.label_statistics or {}).get(SPLITS[0])
    if stats is None:
        raise InvalidInputError("the dataset is a regression's but records no train label "
                                "statistics; shard it again with shard_dataset")
    return (stats.std if stats.std > 0 else 1.0), stats.mean


def in_label_units(model, meta: DatasetMetadata):
    """The model followed by `output * std + mean` (`label_scale`), named after it.

    Raises:
      InvalidInputError: If the model does not end in one output per example.
    """
    import tensorflow as tf

    shape = model.output_shape if hasattr(model, "output_shape") else None
    if shape is not None and tuple(shape[1:]) not in ((1,), ()):
        raise InvalidInputError(
            f"model {model.name!r} gives outputs of shape {list(shape[1:])}; a regression's "
            "model ends in one linear unit (Dense(1))")
    std, mean = label_scale(meta)
    return tf.keras.Sequential(
        [model, tf.keras.layers.Rescaling(std, offset=mean, name=VALUE_LAYER)], name=model.name)


def compile_args() -> Dict[str, Any]:
    """`model.compile`'s loss and metrics for a regression: the MSE, RMSE and MAE."""
    import tensorflow as tf

    metrics: List[Any] = [tf.keras.metrics.RootMeanSquaredError(name=RMSE),
                          tf.keras.metrics.MeanAbsoluteError(name=MAE)]
    return {"loss": tf.keras.losses.MeanSquaredError(), "metrics": metrics}
