"""`kfdist launch --stage`: a program that knows only local paths, with its directories on gs://
or s3://.

Every replica gets local KFDIST_* directories: the dataset and the checkpoints are downloaded
before the program starts, the leader's checkpoints are mirrored back while it runs and when it
ends, and its model is uploaded once it succeeded. Here against the GCS emulator, which the
replicas reach through google-cloud-storage, and a real S3 server (MinIO) reached through boto3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kfdist.components.common import storage
from kfdist.components.launch_program.staging import DirectoryMirror

BUCKET = "kfdist-staged"
#: Counts to 10 in its checkpoint, one step every 0.2 s. The first run, at step 5, waits for a
#: periodic upload, then kills kfdist's entry (its parent) outright: no upload at the end. The
#: replica is restarted under ExitCode and must resume from what the periodic sync uploaded.
COUNTER = """
import json, os, signal, sys, time
checkpoint = os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], "state", "counter.json")
model_dir = os.environ["KFDIST_MODEL_DIR"]
assert not model_dir.startswith("gs://") and os.path.isdir(model_dir), model_dir
start = json.load(open(checkpoint))["step"] if os.path.exists(checkpoint) else 0
print("starting at step", start, "in", os.path.dirname(os.path.dirname(checkpoint)), flush=True)
os.makedirs(os.path.dirname(checkpoint), exist_ok=True)
for step in range(start + 1, 11):
    with open(checkpoint + ".tmp", "w") as f:
        json.dump({"step": step}, f)
    os.replace(checkpoint + ".tmp", checkpoint)
    time.sleep(0.2)
    if step == 5 and start == 0:
        time.sleep(2.5)
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
with open(os.path.join(model_dir, "result.json"), "w") as f:
    json.dump({"resumed_from": start, "data": sorted(os.listdir(os.environ["KFDIST_DATA_DIR"]))}, f)
"""


@pytest.fixture
def bucket(gcs_emulator):
    if not gcs_emulator.client().lookup_bucket(BUCKET):
        gcs_emulator.create_bucket(BUCKET)
    return gcs_emulator


def _read(emulator, uri: str) -> str:
    name, key = storage.split_gcs(uri)
    return emulator.client().bucket(name).blob(key).download_as_text()


def _launch(*args):
    return subprocess.run([sys.executable, "-m", "kfdist", "launch", *args], capture_output=True,
                          text=True, timeout=300)


def _launch_killed_counter(tmp_path, output: str, dataset: str) -> None:
    """Launches COUNTER staged (`--stage`) from `dataset` to `output`; it is killed once and
    succeeds after its restart."""
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "counter.py").write_text(COUNTER)
    done = _launch("--framework", "pytorch", "--workers", "1", "--program-dir",
                   str(tmp_path / "prog"), "--stage", "--sync-seconds", "0.5", "--output", output,
                   "--dataset", dataset, "--", "python", "counter.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "job succeeded (1 restart(s))" in done.stderr


def test_a_killed_replica_resumes_from_the_checkpoints_synced_to_gcs(bucket, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "part-0.txt").write_text("rows\n")
    bucket.upload_dir(str(data), f"gs://{BUCKET}/data/counter")
    output = f"gs://{BUCKET}/runs/counter"
    _launch_killed_counter(tmp_path, output, f"gs://{BUCKET}/data/counter")
    result = json.loads(_read(bucket, f"{output}/model/result.json"))
    assert result == {"resumed_from": 5, "data": ["part-0.txt"]}
    assert json.loads(_read(bucket, f"{output}/checkpoints/state/counter.json")) == {"step": 10}
    # The program's temporary file was renamed away locally, so it is gone on gs:// too.
    assert storage.list_uris(f"{output}/checkpoints/") == [f"{output}/checkpoints/state/counter.json"]


def test_a_killed_replica_resumes_from_the_checkpoints_synced_to_s3(s3_server, tmp_path):
    s3_server.create_bucket(BUCKET)
    s3_server.put(f"minio://{BUCKET}/data/counter/part-0.txt", "rows\n")
    output = f"s3://{BUCKET}/runs/counter"
    _launch_killed_counter(tmp_path, output, f"minio://{BUCKET}/data/counter")
    result = json.loads(s3_server.get(f"{output}/model/result.json"))
    assert result == {"resumed_from": 5, "data": ["part-0.txt"]}
    assert json.loads(s3_server.get(f"{output}/checkpoints/state/counter.json")) == {"step": 10}
    assert s3_server.list(f"{output}/checkpoints/") == [
        f"{output}/checkpoints/state/counter.json"]


def test_a_failed_program_uploads_its_checkpoints_but_no_model(bucket, tmp_path):
    program = tmp_path / "fail.py"
    program.write_text("import os, sys\n"
                       "open(os.path.join(os.environ['KFDIST_CHECKPOINT_DIR'], 'c.txt'), 'w')\n"
                       "open(os.path.join(os.environ['KFDIST_MODEL_DIR'], 'm.txt'), 'w')\n"
                       "print('giving up', flush=True); sys.exit(3)\n")
    output = f"gs://{BUCKET}/runs/failed"
    done = _launch("--framework", "tensorflow", "--workers", "1", "--stage", "--output", output,
                   "--", sys.executable, str(program))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "giving up" in done.stderr + done.stdout
    assert storage.list_uris(f"{output}/") == [f"{output}/checkpoints/c.txt"]


@pytest.mark.parametrize("extra, message", [
    (["--output", "out"], "--stage stages remote locations"),
    (["--output", f"gs://{BUCKET}/x", "--mpi"], "--stage is not for --mpi"),
    (["--output", f"gs://{BUCKET}/x", "--sync-seconds", "0"], "--sync-seconds must be > 0"),
])
def test_stage_where_it_cannot_work_is_refused(tmp_path, extra, message):
    done = subprocess.run([sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow",
                           "--stage", *extra, "--", "python", "-c", "pass"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and os.listdir(tmp_path) == []


def test_the_mirror_uploads_what_changed_and_deletes_what_is_gone(bucket, tmp_path):
    local = tmp_path / "ckpt"
    (local / "sub").mkdir(parents=True)
    (local / "a.txt").write_text("a")
    (local / "sub" / "checkpoint").write_text("index")
    uri = f"gs://{BUCKET}/mirror"
    mirror = DirectoryMirror(str(local), uri)
    assert mirror.sync() == 2
    assert mirror.sync() == 0  # nothing changed: nothing sent
    (local / "a.txt").write_text("changed")
    (local / "sub" / "checkpoint").unlink()
    assert mirror.sync() == 2
    assert storage.list_uris(uri + "/") == [f"{uri}/a.txt"]
    again = DirectoryMirror(str(tmp_path / "restored"), uri)
    assert again.download() == 1 and (tmp_path / "restored" / "a.txt").read_text() == "changed"
    assert again.sync() == 0  # what was downloaded is not sent back
