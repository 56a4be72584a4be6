"""`kfdist run program` with a Keras 3 program: the program guide's snippet, `save_model`
included, gives a SavedModel that is evaluated, blessed and exported as tf-keras' is, whether
the model ends in a softmax or, as the TensorFlow tutorial's, in logits (`from_logits=True`).

The program runs as one replica (Keras 3's `fit` does not run under MultiWorkerMirroredStrategy)
on the bundled digits, without TF_USE_LEGACY_KERAS: TensorFlow 2.21's `tf.keras` is Keras 3.
"""

import glob
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow

# The guide's snippet (docs/guide/program.md), with `build` written out.
PROGRAM = """
import tensorflow as tf
from kfdist import program

assert tf.keras.__version__.startswith("3."), tf.keras.__version__

def build(input_shape, num_classes):
    return tf.keras.Sequential([
        tf.keras.Input(shape=input_shape), tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(num_classes, activation=ACTIVATION)])

train = program.dataset("train", batch_size=64).repeat()
model = build(program.input_shape(), program.num_classes())
loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=ACTIVATION is None)
model.compile(optimizer=tf.keras.optimizers.Adam(0.003), loss=loss, metrics=["accuracy"])
model.fit(train, epochs=4, steps_per_epoch=20, verbose=2)
program.save_model(model)
print("saved with Keras", tf.keras.__version__, flush=True)
"""


@pytest.mark.parametrize("activation", ["softmax", None])
def test_a_keras3_program_is_evaluated_blessed_and_exported(tmp_path, activation):
    program = tmp_path / "train.py"
    program.write_text(f"ACTIVATION = {activation!r}\n" + PROGRAM)
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "program", "--command",
         shlex.join([sys.executable, str(program)]), "--workers", "1",
         "--accuracy-threshold", "0.8", "--output", str(out)],
        capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    with open(out / "logs" / "train-program.log") as f:
        assert "saved with Keras 3." in f.read()
    [saved] = glob.glob(str(out / "pipeline_root" / "*" / "train-program" / "model"
                            / "saved_model"))
    assert not os.path.exists(os.path.join(saved, "keras_metadata.pb"))  # Keras 3's export
    with open(os.path.join(saved, "assets.extra", "kfdist_outputs.json")) as f:
        assert json.load(f) == {"outputs": "probabilities" if activation else "logits"}
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["blessed"] is True and summary["eval"]["accuracy"] >= 0.8, summary
    [export] = glob.glob(str(out / "serving" / "mnist" / "*"))  # named after its data

    import tensorflow as tf

    serve = tf.saved_model.load(export).signatures["serving_default"]
    [(name, spec)] = serve.structured_input_signature[1].items()
    images = np.zeros([2] + [d or 1 for d in spec.shape.as_list()[1:]], spec.dtype.as_numpy_dtype)
    answer = serve(**{name: tf.constant(images)})
    assert answer["probabilities"].shape == (2, 10)
    assert np.allclose(answer["probabilities"].numpy().sum(axis=1), 1.0, atol=1e-4)
