"""`kfdist launch`: `--env` reaches every local replica (and every MPI rank), a succeeded job that
left its model directory empty says so in its framework's words, a replica that lacks kfdist is
told where kfdist must be, and a cluster job gets no word about its image before it runs."""

import json
import os
import subprocess
import sys

import pytest

from component.test_launch_local import WAIT_FOR_PEERS
from kfdist.components.launch_program import program_failures

# Writes the variables asked for to KFDIST_CHECKPOINT_DIR/<TF_CONFIG task or RANK>.json.
DUMP = """
import json, os
task = os.environ.get("TF_CONFIG") and json.loads(os.environ["TF_CONFIG"])["task"]
tag = os.environ.get("RANK") or "{type}-{index}".format(**task)
with open(os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], tag + ".json"), "w") as f:
    json.dump({k: os.environ.get(k) for k in ("SEED", "MODE", "TF_USE_LEGACY_KERAS")}, f)
""" + WAIT_FOR_PEERS.replace("WRITTEN_INTO", "KFDIST_CHECKPOINT_DIR")
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
    assert last.endswith("e.g. kfdist.program.save_model(model)")


def test_a_pytorch_job_is_told_to_save_with_torch(tmp_path):
    done = _kfdist("launch", "--framework", "pytorch", "--workers", "1", "--output",
                   str(tmp_path), "--", sys.executable, "-c", "print('trained')")
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"kfdist: {EMPTY_NOTE}") and "torch.save(model.state_dict()" in last
    assert "kfdist.program" not in last


def test_env_reaches_every_mpi_rank(tmp_path):
    # Open MPI numbers its ranks in OMPI_COMM_WORLD_RANK (no RANK, no TF_CONFIG).
    dump = DUMP.replace('os.environ.get("RANK")', 'os.environ.get("OMPI_COMM_WORLD_RANK")')
    done = _kfdist("launch", "--mpi", "--workers", "2", "--backoff-limit", "0", "--output",
                   str(tmp_path), "--env", "SEED=7", "--", sys.executable, "-c", dump,
                   env={**os.environ, "MODE": "from-the-shell"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ckpt = tmp_path / "checkpoints"
    dumps = {name[:-5]: json.load(open(ckpt / name)) for name in os.listdir(ckpt)}
    assert sorted(dumps) == ["0", "1"]
    assert all(seen["SEED"] == "7" for seen in dumps.values()), dumps


def test_a_replica_without_kfdist_is_told_to_use_the_python_that_has_it(tmp_path):
    # `python -I -S` reads no site-packages nor the working directory: `from kfdist` fails.
    done = _kfdist("launch", "--framework", "tensorflow", "--workers", "1", "--output",
                   str(tmp_path), "--", sys.executable, "-I", "-S", "-c",
                   "from kfdist import program")
    assert done.returncode == 1, done.stderr
    assert "No module named 'kfdist'" in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last == program_failures.no_kfdist_hint(program_failures.LAUNCH_LOCAL), last


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


@pytest.mark.parametrize("flags", [
    # The README's PyTorch command on a cluster, with an image of torch built on kfdist's.
    ["--framework", "pytorch", "--backend", "pytorchjob", "--program-dir", "examples", "--stage",
     "--image", "registry.example.com/team/kfdist-torch:1.0"],
    ["--framework", "tensorflow", "--backend", "trainjob", "--image", "registry.example/t:1"],
])
def test_a_cluster_job_gets_no_guess_about_its_image(flags):
    done = _kfdist("launch", "--dry-run", "--workers", "2", "--output",
                   "gs://team-bucket/runs/r", *flags, "--", "python", "train.py")
    assert done.returncode == 0, done.stderr
    assert "image" not in done.stderr, done.stderr
