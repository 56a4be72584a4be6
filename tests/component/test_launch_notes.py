"""`kfdist launch`: `--env` reaches every local replica, a succeeded job that left its model
directory empty says so, and a user's `--image` that must hold kfdist is named."""

import json
import os
import subprocess
import sys

import pytest

from kfdist import RUNTIME_IMAGE

# Writes the variables asked for to KFDIST_CHECKPOINT_DIR/<TF_CONFIG task or RANK>.json.
DUMP = """
import json, os
task = os.environ.get("TF_CONFIG") and json.loads(os.environ["TF_CONFIG"])["task"]
tag = os.environ.get("RANK") or "{type}-{index}".format(**task)
with open(os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], tag + ".json"), "w") as f:
    json.dump({k: os.environ.get(k) for k in ("SEED", "MODE", "TF_USE_LEGACY_KERAS")}, f)
"""
EMPTY_NOTE = "the program wrote nothing into its model directory"


def _kfdist(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kfdist", *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("layout, replicas", [
    (["--framework", "tensorflow", "--workers", "2", "--ps", "1"],
     ["ps-0", "worker-0", "worker-1"]),
    (["--framework", "pytorch", "--workers", "2"], ["0", "1"]),
])
def test_env_reaches_every_local_replica_over_the_shells_value(tmp_path, layout, replicas):
    shell = {**os.environ, "MODE": "from-the-shell", "SEED": "from-the-shell"}
    done = _kfdist("launch", *layout, "--output", str(tmp_path), "--env", "SEED=7",
                   "--env", "TF_USE_LEGACY_KERAS=1", "--", sys.executable, "-c", DUMP, env=shell)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ckpt = tmp_path / "checkpoints"
    dumps = {name[:-5]: json.load(open(ckpt / name)) for name in os.listdir(ckpt)}
    assert sorted(dumps) == replicas
    for replica, seen in dumps.items():
        assert seen == {"SEED": "7", "MODE": "from-the-shell", "TF_USE_LEGACY_KERAS": "1"}, replica


def test_a_job_that_left_its_model_directory_empty_says_so(tmp_path):
    done = _kfdist("launch", "--framework", "tensorflow", "--workers", "1", "--output",
                   str(tmp_path), "--", sys.executable, "-c", "print('trained')")
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"kfdist: {EMPTY_NOTE} {tmp_path / 'model'} (KFDIST_MODEL_DIR)"), last
    assert "kfdist.program.save_model(model)" in last


@pytest.mark.parametrize("writes, noted", [("", True), ("model/saved_model.pb", False)])
def test_an_empty_model_directory_on_gcs_is_said_too(gcs_emulator, writes, noted):
    if not gcs_emulator.client().lookup_bucket("notes-bucket"):
        gcs_emulator.create_bucket("notes-bucket")
    output = f"gs://notes-bucket/runs/{'saved' if writes else 'empty'}"
    if writes:  # the program writes gs:// itself (tf.io.gfile, model.save): written here for it
        gcs_emulator.client().bucket("notes-bucket").blob(
            output.split("/", 3)[3] + "/" + writes).upload_from_string("x")
    done = _kfdist("launch", "--framework", "tensorflow", "--workers", "1", "--output", output,
                   "--", sys.executable, "-c", "print('trained')")
    assert done.returncode == 0, done.stderr
    assert (f"kfdist: {EMPTY_NOTE} {output}/model (KFDIST_MODEL_DIR)" in done.stderr) == noted


def test_a_job_that_wrote_its_model_says_nothing_more(tmp_path):
    write = ("import os; d = os.environ['KFDIST_MODEL_DIR']; os.makedirs(d + '/v', exist_ok=True);"
             " open(d + '/v/saved_model.pb', 'w').write('x')")
    done = _kfdist("launch", "--framework", "tensorflow", "--workers", "1", "--output",
                   str(tmp_path), "--", sys.executable, "-c", write)
    assert done.returncode == 0, done.stderr
    assert EMPTY_NOTE not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("kfdist: job succeeded")


CLUSTER = ["launch", "--dry-run", "--framework", "tensorflow", "--workers", "2", "--output",
           "gs://team-bucket/runs/r"]


@pytest.mark.parametrize("flags, said", [
    (["--backend", "tfjob", "--program-dir", "examples"], "--program-dir"),
    (["--backend", "tfjob", "--stage"], "--stage"),
    (["--backend", "trainjob"], "a TensorFlow TrainJob (its TF_CONFIG)"),
    (["--backend", "trainjob", "--program-dir", "examples"],
     "--program-dir and a TensorFlow TrainJob (its TF_CONFIG)"),
])
def test_a_users_image_that_must_hold_kfdist_is_named(flags, said):
    done = _kfdist(*CLUSTER, *flags, "--image", "registry.example/team/train:1", "--",
                   "python", "train.py")
    assert done.returncode == 0, done.stderr
    [note] = [line for line in done.stderr.splitlines() if "must hold kfdist" in line]
    assert note.startswith(f"kfdist: with {said}, every replica starts your command through "
                           "kfdist's entry (python -m kfdist...) in --image "
                           "registry.example/team/train:1, so that image must hold kfdist"), note
    assert RUNTIME_IMAGE in note and "No module named 'kfdist'" in note


@pytest.mark.parametrize("flags", [
    ["--backend", "tfjob", "--image", "registry.example/team/train:1"],  # the program alone
    ["--backend", "tfjob", "--program-dir", "examples"],  # kfdist's runtime image
    ["--backend", "tfjob", "--program-dir", "examples", "--image", RUNTIME_IMAGE],
])
def test_no_word_where_the_image_needs_no_kfdist_or_holds_it(flags):
    done = _kfdist(*CLUSTER, *flags, "--", "python", "train.py")
    assert done.returncode == 0, done.stderr
    assert "must hold kfdist" not in done.stderr
