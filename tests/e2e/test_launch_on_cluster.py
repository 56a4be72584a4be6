"""`kfdist launch` with a cluster backend: what the test cluster still shows and the real control
plane does not yet (tests/containers/test_launch_on_the_bed.py and test_cluster_claims_on_the_bed.py
run the examples there): the PyTorch variables side by side with a local run, `auto`'s choice for
PyTorch, the dataset on the PVC, a killed Keras worker.

The test cluster's operator plays the Training Operator v1.9 from its Go source (PyTorchJob:
`<job>-master-0` and `<job>-worker-<i>`, MASTER_ADDR/PORT, WORLD_SIZE, RANK and PET_* in every
container, success when the master succeeds). Its replicas run on this machine, so the PVC the
job mounts is a directory here, given as `--pvc-mount-path`; the user's image is never pulled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from fakes.kube_server.cluster_fixtures import NAMESPACE

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")
#: What the operator injects into a PyTorch replica, and kfdist's own variables.
INJECTED = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_MASTER_ADDR",
            "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
            "PYTHONUNBUFFERED", "KFDIST_MODEL_DIR", "KFDIST_CHECKPOINT_DIR", "KFDIST_DATA_DIR",
            "TF_CONFIG")
ENV_PROGRAM = f"""
import json, os
names = {INJECTED!r}
path = os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], "env-" + os.environ["RANK"] + ".json")
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    json.dump({{n: os.environ[n] for n in names if n in os.environ}}, f)
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], flush=True)
# The job succeeds when the master does, and the workers still running are then deleted: the
# master waits for every rank's file first.
import time
deadline = time.monotonic() + 120
while os.environ["RANK"] == "0" and time.monotonic() < deadline and not all(
        os.path.exists(os.path.join(os.path.dirname(path), f"env-{{r}}.json"))
        for r in range(int(os.environ["WORLD_SIZE"]))):
    time.sleep(0.2)
"""


def _launch(*args, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfdist", "launch", *args], capture_output=True,
                          text=True, timeout=timeout)


def _cluster_flags(pvc, name: str, backend: str = "pytorchjob",
                   image: str = "registry.example.com/team/trainer:1.0"):
    """The cluster options; `image=""` leaves the image to kfdist (with --program-dir)."""
    return ["--backend", backend, *(["--image", image] if image else []), "--name", name,
            "--namespace", NAMESPACE, "--pvc-name", "team-work", "--pvc-mount-path", str(pvc),
            "--timeout", "300"]


def test_local_replicas_get_what_the_pytorchjob_operator_injects(cluster, tmp_path):
    """The same program under `--backend local` and as a PyTorchJob sees the same variables;
    only the master's address and port differ (localhost and a free port, here)."""
    program = tmp_path / "env_program.py"
    program.write_text(ENV_PROGRAM)
    layout = ["--framework", "pytorch", "--workers", "2"]
    local = _launch(*layout, "--output", str(tmp_path / "local"), "--", "python", str(program))
    assert local.returncode == 0, local.stderr[-3000:]
    pvc = tmp_path / "pvc"
    remote = _launch(*layout, "--output", str(pvc / "run"), *_cluster_flags(pvc, "envcheck"),
                     "--", "python", str(program))
    assert remote.returncode == 0, remote.stdout[-3000:] + remote.stderr[-3000:]
    for rank in ("0", "1"):
        here = json.loads((tmp_path / "local" / "checkpoints" / f"env-{rank}.json").read_text())
        there = json.loads((pvc / "run" / "checkpoints" / f"env-{rank}.json").read_text())
        for env, root in ((here, str(tmp_path / "local")), (there, str(pvc / "run"))):
            assert env.pop("KFDIST_MODEL_DIR") == os.path.join(root, "model")
            assert env.pop("KFDIST_CHECKPOINT_DIR") == os.path.join(root, "checkpoints")
            assert env.pop("MASTER_ADDR") == env.pop("PET_MASTER_ADDR")
            assert env.pop("MASTER_PORT") == env.pop("PET_MASTER_PORT")
        assert here == there, (here, there)
        assert here["RANK"] == here["PET_NODE_RANK"] == rank and here["WORLD_SIZE"] == "2"


def test_a_cluster_backend_refuses_an_output_the_replicas_cannot_reach(tmp_path):
    done = _launch("--framework", "pytorch", "--backend", "pytorchjob", "--image", "r/i:1",
                   "--name", "ddp", "--output", str(tmp_path / "out"), "--", "python", "x.py")
    assert done.returncode == 2
    assert (f"--output '{tmp_path / 'out'}' is not where the replicas can reach it: pass a gs:// "
            "URI, or a path under /mnt/kfdist/ with --pvc-name CLAIM") in done.stderr


def test_auto_picks_the_trainjob_where_trainer_runs_torch_distributed(cluster, tmp_path):
    pvc = tmp_path / "pvc"
    done = _launch("--framework", "pytorch", "--workers", "2", "--output", str(pvc / "auto"),
                   *_cluster_flags(pvc, "auto-pt", backend="auto"), "--dry-run", "--", "python",
                   "-m", "torch.distributed.run", "train.py")
    assert done.returncode == 0, done.stderr
    assert "backend auto: trainjob (Kubeflow Trainer and its torch-distributed runtime" in \
        done.stdout
    assert "kind: TrainJob" in done.stdout
    cluster.server.store.delete(("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes",
                                 "", "torch-distributed"))
    done = _launch("--framework", "pytorch", "--workers", "2", "--output", str(pvc / "auto"),
                   *_cluster_flags(pvc, "auto-pt", backend="auto"), "--dry-run", "--", "python",
                   "train.py")
    assert "backend auto: pytorchjob (Kubeflow Trainer or its runtime torch-distributed is not" \
        in done.stdout and "kind: PyTorchJob" in done.stdout


def test_auto_without_a_kubernetes_api_runs_locally(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    program = tmp_path / "p.py"
    program.write_text("import os\nprint('rank', os.environ['RANK'], flush=True)\n")
    done = _launch("--framework", "pytorch", "--workers", "2", "--backend", "auto", "--output",
                   str(tmp_path / "out"), "--", sys.executable, str(program))
    assert done.returncode == 0, done.stderr
    assert "backend auto: local (no Kubernetes API" in done.stdout
    assert "[worker-0] rank 1" in done.stdout


def test_keras_example_reads_the_dataset_on_the_pvc_as_a_tfjob(cluster, tmp_path, digits_dataset):
    import shutil

    from component.test_launch_examples import _eval_accuracy

    pvc = tmp_path / "pvc"
    shutil.copytree(digits_dataset, pvc / "data" / "digits")
    done = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(pvc / "keras"),
                   "--dataset", str(pvc / "data" / "digits"),
                   *_cluster_flags(pvc, "keras", backend="tfjob"), "--", "python",
                   os.path.abspath(os.path.join(EXAMPLES, "keras_fit_backup_restore.py")),
                   "--epochs", "3")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _eval_accuracy(pvc / "keras" / "model", digits_dataset) > 0.8


def test_a_killed_keras_worker_pod_is_recreated_and_the_job_resumes(cluster, tmp_path,
                                                                    digits_dataset):
    """ExitCode as the Training Operator applies it: worker 1 SIGKILLed (137) gets a new pod,
    worker 0 loses its peer and exits 138 (retryable, a new pod too), and both resume from the
    BackupAndRestore backup in KFDIST_CHECKPOINT_DIR instead of epoch 1."""
    import shutil

    from component.test_launch_examples import _eval_accuracy

    pvc = tmp_path / "pvc"
    shutil.copytree(digits_dataset, pvc / "data" / "digits")
    argv = [sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow", "--workers",
            "2", "--restart-policy", "ExitCode", "--output", str(pvc / "keras"), "--dataset",
            str(pvc / "data" / "digits"), *_cluster_flags(pvc, "keras-kill", backend="tfjob"),
            "--", "python", os.path.abspath(os.path.join(EXAMPLES, "keras_fit_backup_restore.py")),
            "--epochs", "4", "--steps-per-epoch", "50"]
    lines, killed = [], False
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as job:
        for line in job.stdout:
            lines.append(line.rstrip("\n"))
            if not killed and line.startswith("[worker-0] Epoch 2/4"):
                [pid] = cluster.operator.replica_pids("keras-kill", "worker-1")
                os.kill(pid, signal.SIGKILL)
                killed = True
        assert job.wait(timeout=400) == 0, "\n".join(lines[-60:])
    output = "\n".join(lines)
    assert killed
    after_kill = output[output.index("[worker-0] Epoch 2/4"):]
    assert "[worker-0] Epoch 1/4" not in after_kill, output[-4000:]  # resumed, not restarted
    assert "[worker-0] Epoch 4/4" in after_kill
    assert len(cluster.operator.replica_pids("keras-kill", "worker-1")) >= 2  # a new pod ran
    assert _eval_accuracy(pvc / "keras" / "model", digits_dataset) > 0.8
