"""`kfdist launch` with a cluster backend: the user's program as a PyTorchJob or a TFJob.

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

from component.test_launch_examples import _saved_model_predicts
from fakes.kube_server.cluster_fixtures import NAMESPACE, wait_for

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")
PYTORCHJOBS = ("kubeflow.org", "v1", "pytorchjobs")
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


def test_pytorch_ddp_example_runs_as_a_pytorchjob(cluster, tmp_path):
    import torch

    pvc = tmp_path / "pvc"
    done = _launch("--framework", "pytorch", "--workers", "3", "--output", str(pvc / "ddp"),
                   *_cluster_flags(pvc, "ddp"), "--", "python",
                   os.path.abspath(os.path.join(EXAMPLES, "pytorch_ddp.py")), "--steps", "100")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "saved model.pt (world size 3)" in done.stdout  # the master's log, streamed
    weights = torch.load(pvc / "ddp" / "model" / "model.pt")
    assert abs(float(weights["weight"]) - 3) < 0.3 and abs(float(weights["bias"]) - 2) < 0.3
    job = cluster.server.store.get(PYTORCHJOBS + (NAMESPACE, "ddp"))
    succeeded = [c for c in job["status"]["conditions"] if c["type"] == "Succeeded"]
    assert succeeded and succeeded[0]["reason"] == "PyTorchJobSucceeded"
    # A master and two workers ran (a worker still running when the master succeeded has its
    # pod deleted: cleanPodPolicy Running).
    for label in ("master-0", "worker-0", "worker-1"):
        assert cluster.operator.replica_pids("ddp", label), label


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


def test_tf2_multi_worker_example_runs_as_a_tfjob(cluster, tmp_path):
    """TF_CONFIG from the operator: the chief (worker 0) saves the SavedModel on the PVC."""
    pvc = tmp_path / "pvc"
    done = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(pvc / "tf2"),
                   *_cluster_flags(pvc, "tf2", backend="tfjob"), "--", "python",
                   os.path.abspath(os.path.join(EXAMPLES, "tf2_multi_worker_custom_loop.py")),
                   "--steps", "60")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert abs(_saved_model_predicts(pvc / "tf2" / "model", 1.0) - 5.0) < 0.5
    for label in ("worker-0", "worker-1"):
        assert cluster.operator.replica_pids("tf2", label), label


def test_sigterm_deletes_the_job_and_its_replicas(cluster, tmp_path):
    program = tmp_path / "forever.py"
    program.write_text("import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    pvc = tmp_path / "pvc"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kfdist", "launch", "--framework", "pytorch", "--workers", "2",
         "--output", str(pvc / "run"), *_cluster_flags(pvc, "forever"), "--", "python",
         str(program)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # the master's log, streamed once it runs
            if "[master-0] up" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "stopped by SIGTERM" in proc.stderr.read()
    wait_for(lambda: not cluster.server.store.items(PYTORCHJOBS, NAMESPACE))
    assert cluster.wait_no_processes() == []


def test_a_shipped_program_runs_as_a_pytorchjob_without_an_image(cluster, tmp_path):
    """--program-dir through the PVC (mounted here too, as in a pipeline step's pod), run by
    kfdist's runtime image; the user's command starts in each replica's copy of it."""
    program = tmp_path / "prog"
    program.mkdir()
    (program / "train.py").write_text(
        "import os, helper\nprint('rank', os.environ['RANK'], 'helper', helper.VALUE, flush=True)\n")
    (program / "helper.py").write_text("VALUE = 7\n")
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    done = _launch("--framework", "pytorch", "--workers", "2", "--output", str(pvc / "run"),
                   "--program-dir", str(program), *_cluster_flags(pvc, "shipped", image=""), "--",
                   "python", "train.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[master-0] rank 0 helper 7" in done.stdout
    assert (pvc / "run" / "program" / "helper.py").is_file()
    job = cluster.server.store.get(PYTORCHJOBS + (NAMESPACE, "shipped"))
    from kfdist import RUNTIME_IMAGE

    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "image"] == RUNTIME_IMAGE


def test_pytorch_ddp_example_runs_as_a_trainjob_on_torch_distributed(cluster, tmp_path):
    """Trainer's torch plugin sets only PET_*: the program starts under torchrun, which works
    the same under --backend local and pytorchjob (whose replicas get PET_* too)."""
    import torch

    pvc = tmp_path / "pvc"
    done = _launch("--framework", "pytorch", "--workers", "2", "--output", str(pvc / "tj"),
                   *_cluster_flags(pvc, "ddp-tj", backend="trainjob"), "--", "python", "-m",
                   "torch.distributed.run",
                   os.path.abspath(os.path.join(EXAMPLES, "pytorch_ddp.py")), "--steps", "100")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "saved model.pt (world size 2)" in done.stdout  # node 0's log, streamed
    weights = torch.load(pvc / "tj" / "model" / "model.pt")
    assert abs(float(weights["weight"]) - 3) < 0.3 and abs(float(weights["bias"]) - 2) < 0.3
    trainjob = cluster.server.store.get(("trainer.kubeflow.org", "v1alpha1", "trainjobs",
                                         NAMESPACE, "ddp-tj"))
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert [c["type"] for c in trainjob["status"]["conditions"] if c["status"] == "True"][-1] == \
        "Complete"


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


def test_tf2_example_runs_as_a_trainjob_on_kfdists_tensorflow_runtime(cluster, tmp_path):
    """Shipped into the runtime image; each node derives the operator's TF_CONFIG from its
    JobSet identity (kfdist's entry), node 0 is the chief that saves the SavedModel."""
    import shutil

    program = tmp_path / "prog"
    program.mkdir()
    shutil.copy(os.path.join(EXAMPLES, "tf2_multi_worker_custom_loop.py"), program)
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    done = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(pvc / "tf2"),
                   "--program-dir", str(program),
                   *_cluster_flags(pvc, "tf2-tj", backend="trainjob", image=""), "--", "python",
                   "tf2_multi_worker_custom_loop.py", "--steps", "60")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert abs(_saved_model_predicts(pvc / "tf2" / "model", 1.0) - 5.0) < 0.5
    trainjob = cluster.server.store.get(("trainer.kubeflow.org", "v1alpha1", "trainjobs",
                                         NAMESPACE, "tf2-tj"))
    assert trainjob["spec"]["runtimeRef"]["name"] == "kfdist-tensorflow"
    assert trainjob["spec"]["trainer"]["numNodes"] == 2


def test_an_mpi_program_runs_as_an_mpijob(cluster, tmp_path):
    """The launcher's mpirun starts the ranks (here on this machine, the workers' sshd being the
    test operator's); the launcher's log carries every rank's lines."""
    from component.test_launch_local import HOROVOD_PROGRAM

    program = tmp_path / "allreduce.py"
    program.write_text(HOROVOD_PROGRAM)
    from kfdist import HOROVOD_IMAGE

    pvc = tmp_path / "pvc"
    done = _launch("--framework", "tensorflow", "--mpi", "--workers", "2", "--output",
                   str(pvc / "hvd"), *_cluster_flags(pvc, "hvd", backend="mpijob",
                                                     image=HOROVOD_IMAGE),
                   "--", "python", str(program))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 1 of 2 sum 3.0" in done.stdout
    assert (pvc / "hvd" / "model" / "sum.txt").read_text() == "3.0"
    job = cluster.server.store.get(("kubeflow.org", "v2beta1", "mpijobs", NAMESPACE, "hvd"))
    assert job["spec"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "image"] == HOROVOD_IMAGE


def test_tf1_parameter_server_example_runs_as_a_tfjob_with_a_ps(cluster, tmp_path):
    """Between-graph replication, as the notebook submits it: the chief (worker 0) decides the
    job; the parameter server, which never ends by itself, is deleted then (cleanPodPolicy)."""
    import json

    pvc = tmp_path / "pvc"
    done = _launch("--framework", "tensorflow", "--workers", "2", "--ps", "1", "--output",
                   str(pvc / "tf1"), *_cluster_flags(pvc, "tf1-ps", backend="tfjob"), "--",
                   "python", os.path.abspath(os.path.join(EXAMPLES, "tf1_parameter_server.py")),
                   "--steps", "200")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    weights = json.loads((pvc / "tf1" / "model" / "weights.json").read_text())
    assert abs(weights["w"] - 3) < 0.3 and abs(weights["b"] - 2) < 0.3, weights
    job = cluster.server.store.get(("kubeflow.org", "v1", "tfjobs", NAMESPACE, "tf1-ps"))
    assert set(job["spec"]["tfReplicaSpecs"]) == {"Worker", "PS"}
    assert cluster.operator.replica_pids("tf1-ps", "ps-0")


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
