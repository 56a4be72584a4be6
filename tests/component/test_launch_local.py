"""`kfdist launch --backend local`: a user's program gets exactly the operator's environment."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kfdist.components.train_distributed.job import tf_config

#: Ends a program only once every replica wrote its file into the directory of variable
#: `WRITTEN_INTO`: the replica whose exit decides the job (as the operator decides it: worker 0,
#: the master) would otherwise end it, and the replicas still running, before a slower one
#: wrote, on a loaded machine.
WAIT_FOR_PEERS = """
import glob, time
cluster = json.loads(os.environ.get("TF_CONFIG") or '{"cluster": {}}')["cluster"]
peers = int(os.environ.get("PET_NNODES") or os.environ.get("OMPI_COMM_WORLD_SIZE") or
            sum(len(tasks) for tasks in cluster.values()) or 1)
while len(glob.glob(os.path.join(os.environ["WRITTEN_INTO"], "*.json"))) < peers:
    time.sleep(0.05)
"""
# Writes the variables an operator or kfdist injects to <KFDIST_MODEL_DIR>/<rank or task>.json.
DUMP = """
import json, os
keys = [k for k in os.environ if k in {names} or k.startswith("PET_")]
tag = os.environ.get("RANK") or json.loads(os.environ["TF_CONFIG"])["task"]["type"] + "-" + \
    str(json.loads(os.environ["TF_CONFIG"])["task"]["index"])
with open(os.path.join(os.environ["KFDIST_MODEL_DIR"], tag + ".json"), "w") as f:
    json.dump({{k: os.environ[k] for k in keys}}, f)
print("wrote", tag)
""".format(names=repr({"TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
                       "KFDIST_MODEL_DIR", "KFDIST_DATA_DIR", "KFDIST_CHECKPOINT_DIR"})) + \
    WAIT_FOR_PEERS.replace("WRITTEN_INTO", "KFDIST_MODEL_DIR")


def _launch(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kfdist", "launch", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def _dumps(model_dir):
    return {name[:-5]: json.load(open(os.path.join(model_dir, name)))
            for name in os.listdir(model_dir) if name.endswith(".json")}


def test_tensorflow_replicas_get_the_operators_tf_config(tmp_path):
    env = {**os.environ, "RANK": "7", "TF_CONFIG": "{}"}  # the shell's own values never leak in
    done = _launch("--framework", "tensorflow", "--workers", "2", "--ps", "1", "--output",
                   str(tmp_path / "out"), "--dataset", str(tmp_path), "--",
                   sys.executable, "-c", DUMP, env=env)
    assert done.returncode == 0, done.stderr
    dumps = _dumps(tmp_path / "out" / "model")
    assert sorted(dumps) == ["ps-0", "worker-0", "worker-1"]
    cluster = json.loads(dumps["worker-0"]["TF_CONFIG"])["cluster"]
    assert sorted(cluster) == ["ps", "worker"] and len(cluster["worker"]) == 2
    for label, got in dumps.items():
        task = tf_config.Task(*label.split("-")[:1], int(label.split("-")[1]))
        assert got["TF_CONFIG"] == tf_config.to_env_value(tf_config.tf_config_for(cluster, task))
        assert "RANK" not in got
        assert got["KFDIST_DATA_DIR"] == str(tmp_path)
        assert got["KFDIST_CHECKPOINT_DIR"] == str(tmp_path / "out" / "checkpoints")
    assert "[worker-1] wrote worker-1" in done.stdout


def test_pytorch_replicas_get_master_rank_and_pet_variables(tmp_path):
    done = _launch("--framework", "pytorch", "--workers", "3", "--procs-per-worker", "2",
                   "--output", str(tmp_path), "--", sys.executable, "-c", DUMP)
    assert done.returncode == 0, done.stderr
    dumps = _dumps(tmp_path / "model")
    assert sorted(dumps) == ["0", "1", "2"]
    port = dumps["0"]["MASTER_PORT"]
    for rank, got in dumps.items():
        assert got == {"MASTER_ADDR": "localhost", "MASTER_PORT": port, "PET_MASTER_ADDR": "localhost",
                       "PET_MASTER_PORT": port, "WORLD_SIZE": "6", "RANK": rank,
                       "PET_NODE_RANK": rank, "PET_NNODES": "3", "PET_NPROC_PER_NODE": "2",
                       "KFDIST_MODEL_DIR": str(tmp_path / "model"),
                       "KFDIST_CHECKPOINT_DIR": str(tmp_path / "checkpoints")}
    assert "[master-0] wrote 0" in done.stdout and "[worker-1] wrote 2" in done.stdout


def test_without_framework_the_programs_imports_choose_it_and_the_console_says_so(tmp_path):
    program = tmp_path / "train.py"
    program.write_text("if False:\n    import torch  # read, never run\n" + DUMP)
    done = _launch("--workers", "2", "--output", str(tmp_path / "pt"), "--", sys.executable,
                   str(program))
    assert done.returncode == 0, done.stderr
    assert "framework: pytorch (train.py imports torch; --framework chooses)" in done.stderr
    assert sorted(_dumps(tmp_path / "pt" / "model")) == ["0", "1"]  # RANK: a PyTorch job
    done = _launch("--workers", "2", "--output", str(tmp_path / "tf"), "--", sys.executable, "-c",
                   DUMP)
    assert done.returncode == 0, done.stderr
    assert ("framework: tensorflow (the default: the -c program imports neither tensorflow nor "
            "torch; --framework chooses)") in done.stderr
    assert sorted(_dumps(tmp_path / "tf" / "model")) == ["worker-0", "worker-1"]


# Writes the program's whole environment to <KFDIST_MODEL_DIR>/env.json.
ENV_DUMP = """
import json, os
with open(os.path.join(os.environ["KFDIST_MODEL_DIR"], "env.json"), "w") as f:
    json.dump(dict(os.environ), f)
"""
#: Variables kfdist's own processes set for themselves (tf-keras, quiet TensorFlow).
KFDIST_OWN = ("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")


@pytest.mark.parametrize("exported, how", [
    ({}, "command"),
    ({}, "program-dir"),
    ({}, "mpi"),
    ({"TF_USE_LEGACY_KERAS": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}, "command"),
    ({"TF_USE_LEGACY_KERAS": "1"}, "program-dir"),
])
def test_no_variable_of_kfdists_own_reaches_the_program(tmp_path, exported, how):
    """The program sees TF_USE_LEGACY_KERAS and TF_CPP_MIN_LOG_LEVEL only as the user exported
    them, as the same program in its own image on a cluster would (kfdist's own processes
    choose tf-keras for themselves), and of kfdist's variables only the KFDIST_* locations."""
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "KFDIST_"))}
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "dump_env.py").write_text(ENV_DUMP)
    program = {"command": ["--", sys.executable, str(tmp_path / "prog" / "dump_env.py")],
               "program-dir": ["--program-dir", str(tmp_path / "prog"), "--", sys.executable,
                               "dump_env.py"],
               "mpi": ["--mpi", "--", sys.executable, str(tmp_path / "prog" / "dump_env.py")]}
    done = _launch("--framework", "tensorflow", "--workers", "1", "--output",
                   str(tmp_path / "out"), *program[how], env={**shell, **exported})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with open(tmp_path / "out" / "model" / "env.json") as f:
        seen = json.load(f)
    assert {name: seen[name] for name in KFDIST_OWN if name in seen} == exported
    assert sorted(name for name in seen if name.startswith("KFDIST_")) == [
        "KFDIST_CHECKPOINT_DIR", "KFDIST_MODEL_DIR"]


def test_program_that_exits_1_fails_with_its_last_lines(tmp_path):
    program = "import sys; print('loading shards'); print('bad shard 3', file=sys.stderr); sys.exit(1)"
    done = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(tmp_path),
                   "--", sys.executable, "-c", program)
    assert done.returncode == 1
    assert "kfdist: error: training failed" in done.stderr and "bad shard 3" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_command_is_refused_within_seconds_naming_it(tmp_path):
    started = time.monotonic()
    done = _launch("--framework", "pytorch", "--output", str(tmp_path / "out"), "--",
                   "no-such-trainer", "--epochs", "1")
    assert done.returncode == 2
    assert "kfdist: invalid input: command 'no-such-trainer' was not found" in done.stderr
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_tensorflow_only_layout_is_refused_for_pytorch(tmp_path):
    done = _launch("--framework", "pytorch", "--ps", "1", "--output", str(tmp_path), "--", "true")
    assert done.returncode == 2 and "--ps" in done.stderr


def test_sigterm_stops_every_replica_of_a_user_program(tmp_path):
    program = "import time; print('up', flush=True); time.sleep(120)"
    argv = [sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow", "--workers", "2",
            "--ps", "1", "--output", str(tmp_path), "--", sys.executable, "-c", program]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as job:
        pids, up = [], set()
        for line in job.stdout:
            if line.startswith("started "):
                pids = [int(part.split(" pid ")[1]) for part in line.split(": ", 1)[1].split(", ")]
            if line.endswith("] up\n"):
                up.add(line.split("]")[0])
            if len(up) == 3:
                break
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == 143
        assert "kfdist: stopped by SIGTERM" in job.stderr.read()
    assert len(pids) == 3
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]


def test_dry_run_prints_the_pytorchjob_valid_against_the_crd(tmp_path):
    import yaml

    from fakes import crd_schema

    done = _launch("--framework", "pytorch", "--workers", "3", "--backend", "pytorchjob",
                   "--image", "registry.example/ddp:1", "--name", "ddp-run", "--output", "gs://b/run",
                   "--dry-run", "--", "python", "train.py")
    assert done.returncode == 0, done.stderr
    body = yaml.safe_load(done.stdout)
    crd = crd_schema.load_crd(crd_schema.crd_path("pytorchjobs.kubeflow.org.v1.training-operator-v1.9.yaml"))
    assert crd.validate(body) == [] and "&id" not in done.stdout
    env = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "KFDIST_MODEL_DIR", "value": "gs://b/run/model"} in env


def test_a_gs_output_reaches_the_replicas_and_one_in_no_bucket_is_refused(gcs_emulator):
    """Without --stage, a gs:// --output reaches the program as it is (TensorFlow writes there
    itself); a bucket that does not exist is refused before any replica starts."""
    gcs_emulator.client().lookup_bucket("launch-out") or gcs_emulator.create_bucket("launch-out")
    program = "import os; print('model dir', os.environ['KFDIST_MODEL_DIR'], flush=True)"
    done = _launch("--framework", "tensorflow", "--output", "gs://launch-out/run", "--",
                   sys.executable, "-c", program)
    assert done.returncode == 0, done.stderr
    assert "model dir gs://launch-out/run/model" in done.stdout
    done = _launch("--framework", "tensorflow", "--output", "gs://no-such-bucket-kfdist/run",
                   "--", sys.executable, "-c", program)
    assert done.returncode == 2 and "no-such-bucket-kfdist" in done.stderr, done.stderr
    assert "model dir" not in done.stdout and "Traceback" not in done.stderr


def test_pytorch_job_succeeds_when_the_master_does(tmp_path):
    # The Training Operator's PyTorchJob succeeds on its master; the workers still running are ended.
    program = ("import os, time\nif os.environ['RANK'] != '0':\n    time.sleep(120)\n"
               "print('master done', flush=True)")
    started = time.monotonic()
    done = _launch("--framework", "pytorch", "--workers", "3", "--output", str(tmp_path), "--timeout",
                   "60", "--", sys.executable, "-c", program)
    assert done.returncode == 0, done.stderr
    assert "ending the replicas still running: worker-0, worker-1" in done.stdout
    assert time.monotonic() - started < 50


def test_a_cluster_job_is_named_by_its_command_and_output_unless_named():
    import yaml

    def name(*program, output="gs://b/run"):
        done = _launch("--framework", "tensorflow", "--backend", "tfjob", "--image", "r/i:1",
                       "--output", output, "--dry-run", "--", *program)
        assert done.returncode == 0, done.stderr
        return yaml.safe_load(done.stdout)["metadata"]["name"]

    first = name("python", "train.py")
    assert first.startswith("kfdist-tf-") and first == name("python", "train.py")
    assert first != name("python", "train.py", "--epochs", "2")
    assert first != name("python", "train.py", output="gs://b/other")


HOROVOD_PROGRAM = """
import os
import horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()} sum {float(total)}", flush=True)  # one write
if hvd.rank() == 0:
    with open(os.path.join(os.environ["KFDIST_MODEL_DIR"], "sum.txt"), "w") as f:
        f.write(str(float(total)))
"""


def test_an_mpi_program_runs_under_mpirun_as_an_mpijobs_launcher_would(tmp_path):
    program = tmp_path / "allreduce.py"
    program.write_text(HOROVOD_PROGRAM)
    done = _launch("--framework", "tensorflow", "--mpi", "--workers", "2", "--output",
                   str(tmp_path / "out"), "--", sys.executable, str(program))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[rank-0] rank 0 of 2 sum 3.0" in done.stdout
    assert "[rank-1] rank 1 of 2 sum 3.0" in done.stdout
    assert (tmp_path / "out" / "model" / "sum.txt").read_text() == "3.0"
