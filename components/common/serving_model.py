"""The serving SavedModel of a trained model: raw inputs in, class ids and probabilities out.

The training leader writes it into the Model artifact (`serving_model/`, see
`model_artifact`) right after the Keras SavedModel, from that SavedModel, so
`export_saved_model` publishes it by copying files, without TensorFlow. Its
`serving_default` signature takes raw inputs as the dataset's feature spec
describes them (`serving_inputs`), applies the recorded preprocessing, runs
the model and returns `class_ids` (int64 `[None]`), `class_names` (string
`[None]`: the dataset's name of each class, `dataset_spec.display_class_names`)
and `probabilities` (float32 `[None, num_classes]`); for a regression, `value` (float32
`[None]`: the predicted number, in the label's units).
"""

from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import tf_features
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.common.serving_inputs import SIGNATURE_NAME, VALUE_OUTPUT
from kfdist.program import OUTPUTS_FILE, OUTPUTS_LOGITS


#: The file a tf-keras SavedModel holds and an exported one (Keras 3's `model.export`) lacks.
KERAS_METADATA_FILE = "keras_metadata.pb"


class ExportedModel(tf.Module):
    """A SavedModel without Keras metadata (Keras 3's `model.export`), called through its
    serving signature as a Keras model is called: `model(inputs, training=False)`.

    Attributes:
      logits: Whether its output is logits (softmax not applied) rather than probabilities.
    """

    def __init__(self, loaded, where: str, logits: Optional[bool] = None):
        """Wraps a loaded SavedModel.

        Args:
          loaded: `tf.saved_model.load`'s object.
          where: Its directory, named in a refusal.
          logits: Whether its output is logits, as `kfdist.program.save_model` recorded it; None:
            unknown, told from one batch's outputs (`logits_of_outputs`).

        Raises:
          InvalidInputError: It has no serving signature of one input and one output.
        """
        super().__init__()
        self.loaded = loaded
        if SIGNATURE_NAME not in loaded.signatures:
            raise InvalidInputError(
                f"the SavedModel {where} has no {SIGNATURE_NAME!r} signature (it has "
                f"{sorted(loaded.signatures) or 'none'}): save the Keras model with "
                "kfdist.program.save_model(model)")
        signature = loaded.signatures[SIGNATURE_NAME]
        inputs, outputs = signature.structured_input_signature[1], signature.structured_outputs
        if len(inputs) != 1 or len(outputs) != 1:
            names = lambda specs: ", ".join(sorted(specs))  # noqa: E731
            raise InvalidInputError(
                f"the SavedModel {where} takes {len(inputs)} input(s) ({names(inputs)}) and gives "
                f"{len(outputs)} output(s) ({names(outputs)}): kfdist scores a model of one input "
                "(the preprocessed example) and one output (a score per class)")
        [(self._input_name, spec)] = inputs.items()
        [self._output_name] = outputs
        if logits is None:
            shape = [1 if d is None else d for d in spec.shape.as_list()]
            probe = self(tf.zeros([2] + shape[1:], spec.dtype))
            logits = logits_of_outputs(probe.numpy())
            print(f"kfdist: the SavedModel {where} does not record whether it outputs logits; "
                  f"one batch's outputs {'are not' if logits else 'are'} probabilities (in [0, 1],"
                  f" each row summing to 1), so they are read as "
                  f"{'logits (softmax applied)' if logits else 'probabilities'}", flush=True)
        self.logits = logits

    def __call__(self, inputs, training: bool = False):
        del training  # an exported model is for inference only
        outputs = self.loaded.signatures[SIGNATURE_NAME](**{self._input_name: inputs})
        return outputs[self._output_name]


def load_trained_model(saved_model_dir: str):
    """The trained model of a SavedModel: a tf-keras model (`model.save`), or a Keras 3 export
    (`model.export`) as an `ExportedModel`.

    Args:
      saved_model_dir: A local SavedModel directory.
    """
    if tf.io.gfile.exists(os.path.join(saved_model_dir, KERAS_METADATA_FILE)):
        return tf.keras.models.load_model(saved_model_dir, compile=False)
    record, logits = os.path.join(saved_model_dir, OUTPUTS_FILE), None
    if tf.io.gfile.exists(record):
        with tf.io.gfile.GFile(record) as f:
            logits = json.load(f).get("outputs") == OUTPUTS_LOGITS
    return ExportedModel(tf.saved_model.load(saved_model_dir), saved_model_dir, logits)


def logits_of_outputs(outputs: np.ndarray) -> bool:
    """Whether a batch of a model's outputs is logits: a value outside [0, 1], or a row that
    does not sum to 1 (a softmax's always does)."""
    outputs = np.asarray(outputs, dtype=np.float64)
    return bool(outputs.min() < 0 or outputs.max() > 1
                or not np.allclose(outputs.sum(axis=-1), 1.0, atol=1e-3))


def outputs_are_logits(model) -> bool:
    """Returns whether a Keras model's last layer emits logits rather than probabilities.

    A final softmax (as an activation, an `Activation` layer or a `Softmax`
    layer) means probabilities; a final layer with a linear activation means
    logits. An `ExportedModel` (whose layers are not saved) says it itself. Anything else is
    taken as probabilities.
    """
    if isinstance(model, ExportedModel):
        return model.logits
    last = model.layers[-1]
    if isinstance(last, tf.keras.layers.Softmax):
        return False
    activation = getattr(last, "activation", None)
    return activation is not None and getattr(activation, "__name__", "") == "linear"


def serving_module(model, meta: ds.DatasetMetadata) -> tf.Module:
    """Wraps a Keras model in a `tf.Module` whose `serve` function takes raw inputs.

    Returns:
      The module; it tracks the model's variables.
    """
    preprocess = tf_features.preprocess_fn(meta)
    to_raw = tf_features.raw_from_serving(meta)
    module = tf.Module()
    module.model = model
    if meta.is_regression:
        @tf.function(input_signature=[tf_features.serving_signature(meta)])
        def serve_value(inputs):
            out = module.model(preprocess(to_raw(inputs)), training=False)
            return {VALUE_OUTPUT: tf.reshape(tf.cast(out, tf.float32), [-1])}

        module.serve = serve_value
        return module
    logits = outputs_are_logits(model)
    names = tf.constant(ds.display_class_names(meta), tf.string)

    @tf.function(input_signature=[tf_features.serving_signature(meta)])
    def serve(inputs):
        out = module.model(preprocess(to_raw(inputs)), training=False)
        probs = tf.cast(tf.nn.softmax(out) if logits else out, tf.float32)
        class_ids = tf.argmax(probs, axis=-1, output_type=tf.int64)
        return {"class_ids": class_ids, "class_names": tf.gather(names, class_ids),
                "probabilities": probs}

    module.serve = serve
    return module


def save_serving_model(keras_saved_model: str, meta: ds.DatasetMetadata, out_dir: str) -> None:
    """Saves the serving SavedModel of a Keras SavedModel into `out_dir`.

    The model is loaded back from its SavedModel (without its optimizer), so
    the result is the same whichever strategy trained it.

    Args:
      keras_saved_model: Directory of the Keras SavedModel (input: preprocessed float32), from
        tf-keras' `model.save` or Keras 3's `model.export`.
      meta: The metadata of the dataset it was trained on.
      out_dir: Directory to write (created; must not hold a SavedModel yet).
    """
    model = load_trained_model(keras_saved_model)
    module = serving_module(model, meta)
    os.makedirs(out_dir, exist_ok=True)
    tf.saved_model.save(module, out_dir, signatures={SIGNATURE_NAME: module.serve})
