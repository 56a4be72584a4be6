"""The serving SavedModel of a trained model: raw inputs in, class ids and probabilities out.

The training leader writes it into the Model artifact (`serving_model/`, see
`model_artifact`) right after the Keras SavedModel, from that SavedModel, so
`export_saved_model` publishes it by copying files, without TensorFlow. Its
`serving_default` signature takes raw inputs as the dataset's feature spec
describes them (`serving_inputs`), applies the recorded preprocessing, runs
the model and returns `class_ids` (int64 `[None]`), `class_names` (string
`[None]`: the dataset's name of each class, `dataset_spec.display_class_names`)
and `probabilities` (float32 `[None, num_classes]`).
"""

from __future__ import annotations

import os

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import tf_features
from kfdist.components.common.serving_inputs import SIGNATURE_NAME


#: The file a tf-keras SavedModel holds and an exported one (Keras 3's `model.export`) lacks.
KERAS_METADATA_FILE = "keras_metadata.pb"


class ExportedModel(tf.Module):
    """A SavedModel without Keras metadata (Keras 3's `model.export`), called through its
    serving signature as a Keras model is called: `model(inputs, training=False)`."""

    def __init__(self, loaded):
        super().__init__()
        self.loaded = loaded
        signature = loaded.signatures[SIGNATURE_NAME]
        [self._input_name] = signature.structured_input_signature[1]
        [self._output_name] = signature.structured_outputs

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
    return ExportedModel(tf.saved_model.load(saved_model_dir))


def outputs_are_logits(model) -> bool:
    """Returns whether a Keras model's last layer emits logits rather than probabilities.

    A final softmax (as an activation, an `Activation` layer or a `Softmax`
    layer) means probabilities; a final layer with a linear activation means
    logits. Anything else, an `ExportedModel`'s outputs included (its layers are
    not saved), is taken as probabilities.
    """
    if isinstance(model, ExportedModel):
        return False
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
    logits = outputs_are_logits(model)
    names = tf.constant(ds.display_class_names(meta), tf.string)
    module = tf.Module()
    module.model = model

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
