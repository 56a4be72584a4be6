"""`kfdist.program` where a cluster job's locations are an object store's (the replicas read a
remote dataset in place unless `stage` is set): the program reads the dataset through a copy on
its machine, and the leader's SavedModel is uploaded to the remote model directory, on the S3
server of `fakes.s3_server` (MinIO).
"""

import os
import subprocess
import sys

from kfdist.components.common import storage

PROGRAM = """
import os
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf
from kfdist import program
model = tf.keras.Sequential([
    tf.keras.Input(shape=program.input_shape()), tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(program.num_classes(), activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(program.dataset("train", batch_size=64), epochs=1, steps_per_epoch=3, verbose=0)
print("saved to", program.save_model(model), flush=True)
"""


def test_a_remote_dataset_is_read_and_the_leaders_model_uploaded(digits_dataset, s3_server,
                                                                   tmp_path):
    s3_server.create_bucket("work")
    storage.copy_dir_to(digits_dataset, "s3://work/job/dataset")
    env = {**os.environ, "KFDIST_DATA_DIR": "s3://work/job/dataset",
           "KFDIST_MODEL_DIR": "s3://work/job/model", "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "saved to s3://work/job/model" in done.stdout
    saved = {uri.removeprefix("s3://work/job/model/")
             for uri in storage.list_uris("s3://work/job/model")}
    assert {"saved_model.pb", "assets.extra/kfdist_outputs.json"} <= saved, saved
    # One copy of the dataset on this machine; the model's local copy is gone.
    assert [p.name.startswith("kfdist-program-dataset-") for p in tmp_path.iterdir()] == [True]

