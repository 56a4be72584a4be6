"""Keras 3 exports (`model.export`, no Keras metadata) are scored as what they output: logits
(the TensorFlow tutorial's last `Dense(10)` with `from_logits=True`) get a softmax, as recorded by
`kfdist.program.save_model` or, without its record, as one batch shows; a SavedModel kfdist
cannot score (several outputs, no serving signature) is refused in one line.

The Keras 3 models are built and exported by a Python without TF_USE_LEGACY_KERAS (TensorFlow
2.21's `tf.keras` is Keras 3 there); this process reads them as the evaluate step does.
"""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from kfdist.components.common import serving_model
from kfdist.components.common.errors import InvalidInputError
from kfdist.program import OUTPUTS_FILE

EXPORT = """
import sys
import tensorflow as tf
from kfdist import program

assert tf.keras.__version__.startswith("3."), tf.keras.__version__
out = sys.argv[1]
for name, activation in (("logits", None), ("softmax", "softmax")):
    model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(8),
                                 tf.keras.layers.Dense(3, activation=activation)])
    program.save_model(model, f"{out}/{name}-recorded")
    model.export(f"{out}/{name}-unrecorded", verbose=False)
"""


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    out = tmp_path_factory.mktemp("keras3")
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    done = subprocess.run([sys.executable, "-c", EXPORT, str(out)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("name, logits", [("logits", True), ("softmax", False)])
def test_save_model_records_what_the_model_outputs(exports, name, logits, capsys):
    saved = str(exports / f"{name}-recorded")
    assert not os.path.exists(os.path.join(saved, serving_model.KERAS_METADATA_FILE))
    with open(os.path.join(saved, OUTPUTS_FILE)) as f:
        assert json.load(f) == {"outputs": "logits" if logits else "probabilities"}
    model = serving_model.load_trained_model(saved)
    assert serving_model.outputs_are_logits(model) is logits
    assert "does not record" not in capsys.readouterr().out


@pytest.mark.parametrize("name, logits", [("logits", True), ("softmax", False)])
def test_an_export_without_the_record_is_read_from_one_batch_and_says_so(exports, name, logits,
                                                                          capsys):
    model = serving_model.load_trained_model(str(exports / f"{name}-unrecorded"))
    assert serving_model.outputs_are_logits(model) is logits
    said = capsys.readouterr().out
    assert "does not record whether it outputs logits" in said
    assert ("read as logits (softmax applied)" in said) is logits


class _TwoOutputs(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(self, x):
        return {"scores": x[:, :3], "embedding": x}


def test_a_savedmodel_of_two_outputs_is_refused_in_one_line(tmp_path):
    module = _TwoOutputs()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve})
    with pytest.raises(InvalidInputError) as refused:
        serving_model.load_trained_model(str(tmp_path))
    message = str(refused.value)
    assert "\n" not in message and "gives 2 output(s) (embedding, scores)" in message, message
    assert message.startswith(f"the SavedModel {tmp_path} takes 1 input(s)")


def test_a_savedmodel_without_a_serving_signature_is_refused_in_one_line(tmp_path):
    module = _TwoOutputs()
    tf.saved_model.save(module, str(tmp_path), signatures={"predict": module.serve})
    with pytest.raises(InvalidInputError) as refused:
        serving_model.load_trained_model(str(tmp_path))
    assert str(refused.value) == (
        f"the SavedModel {tmp_path} has no 'serving_default' signature (it has ['predict']): "
        "save the Keras model with kfdist.program.save_model(model)")
