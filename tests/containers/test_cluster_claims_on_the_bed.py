"""The training step's remaining cluster claims on the real control plane: one replica, the
`program` pipeline's step, a missing image, and replicas killed mid-training (a TrainJob node,
a Horovod worker). (A retried step re-attaching to its TFJob, and the task's own settings reaching
the replicas: test_kfp_own_pipeline.py, from Kubeflow Pipelines' own driver and Argo's retry.)

As in test_run_on_the_bed.py, the step runs here with the pipeline runner's ServiceAccount token,
the real operators run the job, and the step and the replicas meet on the PVC `team-work`
(/mnt/kfdist here, linked to the node's directory for that claim).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cluster.fixture import wait_for
from containers import test_run_on_the_bed as run_on_the_bed
from containers.test_launch_on_the_bed import _cluster_flags, _launch, _program
from containers.test_run_on_the_bed import CLAIM, MOUNT, _conditions, _run
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed import runtime

pytestmark = pytest.mark.slow
work_pvc = run_on_the_bed.work_pvc  # the PVC at /mnt/kfdist, as there
EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")
#: The fault runs: long enough that the kill lands mid-training (the digits' epochs take well
#: under a second here).
EPOCHS, KILL_AFTER_EPOCH = 20, 2

def _step_options(ns, run_id: str, **overrides) -> dict:
    """The training step's cluster parameters for a job in the test's namespace, on the PVC."""
    return {**dict(backend="tfjob", workers=2, namespace=ns.name, run_id=run_id,
                   task_name="train-distributed", pvc_name=CLAIM, work_uri=f"{MOUNT}/{run_id}",
                   timeout_seconds=600), **overrides}


def test_mnist_trains_on_one_replica(bed_namespace, work_pvc, kfdist_images, tmp_path):
    """`mirrored` is one TFJob replica. (Where `auto` points: test_run_on_the_bed.py's TrainJob
    under multi_worker_mirrored.)"""
    summary = _run(bed_namespace, tmp_path / "run", "tfjob", "mirrored")
    assert summary["blessed"] is True and summary["eval"]["accuracy"] >= 0.90
    [job] = bed_namespace.get("tfjob")
    assert bed_namespace.get("trainjob") == [] and bed_namespace.get("mpijob") == []
    pods = bed_namespace.get("pod")
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    assert list(job["spec"]["tfReplicaSpecs"]) == ["Worker"]
    assert ("Succeeded", "TFJobSucceeded") in _conditions(job)


@pytest.mark.parametrize("backend, done", [("tfjob", ("Succeeded", "TFJobSucceeded")),
                                           ("trainjob", ("Complete", "AllJobsCompleted"))])
def test_the_program_pipelines_step_trains_the_keras_example_as_a_cluster_job(
        backend, done, bed_namespace, work_pvc, kfdist_images, tmp_path):
    """`kfdist run program --backend tfjob|trainjob`: the example on the PVC, run by kfdist's
    runtime image in each replica; the step completes the Model artifact, which is evaluated and
    blessed."""
    program = work_pvc / "program" / "keras_fit_backup_restore.py"
    program.parent.mkdir()
    shutil.copy(os.path.join(EXAMPLES, program.name), program)
    out = tmp_path / "run"
    finished = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "program", "--command",
         f"python {MOUNT}/program/{program.name} --epochs 3", "--backend", backend, "--workers",
         "2", "--namespace", bed_namespace.name, "--pvc-name", CLAIM, "--work-uri",
         f"{MOUNT}/program-step", "--accuracy-threshold", "0.8", "--output", str(out)],
        capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["blessed"] is True, summary
    step_log = (out / "logs" / "train-program.log").read_text()
    assert "Epoch 3/3" in step_log, step_log[-3000:]  # the leader's log, streamed
    [job] = bed_namespace.get(backend)
    assert done in _conditions(job)
    if backend == "tfjob":
        [container] = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        assert container["image"] == kfdist_images["runtime"]
    else:
        assert job["spec"]["trainer"]["image"] == kfdist_images["runtime"]
    # The job's model is at the work location the step was given, on the claim.
    assert (work_pvc / "program-step" / "model" / "saved_model.pb").is_file()


def _step_pod(ns, name: str) -> dict:
    """A pod standing for a pipeline step's own (it waits, and ends on SIGTERM): the owner the
    step names."""
    return json.loads(ns.kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
            "containers": [{"name": "main", "image": "docker.io/library/debian:12.15-slim",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 900 & wait"]}]}})
    ).stdout)


def test_a_missing_image_fails_the_step_naming_the_pull_error(bed_namespace, work_pvc,
                                                              digits_dataset, tmp_path):
    """No operator fails a job whose image cannot be pulled: the step's timeout ends it, and
    kfdist's diagnosis names the kubelet's reason; the job is deleted."""
    image = "registry.example.com/team/missing:1.0"
    log = []
    with pytest.raises(TrainingFailedError) as raised:
        runtime.train(digits_dataset, str(tmp_path / "model"), log=log.append, epochs=1,
                      **_step_options(bed_namespace, "run-ghost", timeout_seconds=45,
                                      image=image))
    message = str(raised.value)
    assert re.search(r"worker-\d: container tensorflow (ImagePullBackOff|ErrImagePull)",
                     message), message
    assert image in message, message
    assert "Traceback" not in message
    wait_for(lambda: not bed_namespace.get("tfjob"), seconds=60, what="the job to be deleted")


def _kill_mpi_rank(rank: int, work_uri: str) -> str:
    """SIGKILLs the replica process of MPI rank `rank` (a process sshd started in a worker's
    container, seen here by its environment); says what it did."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if ("kfdist.components.train_distributed.replica" in argv and work_uri in argv
                and f"OMPI_COMM_WORLD_RANK={rank}" in env):
            os.kill(int(pid), signal.SIGKILL)
            return f"killed rank {rank} (pid {pid} here)"
    return ""


def _epochs_backed_up(work: Path) -> int:
    """How many epochs the replicas' backup in the work location holds (0 before the first)."""
    from kfdist.components.train_distributed.replica.callbacks import EPOCHS_DONE_FILE

    done = 0
    for folder, _, files in os.walk(work):  # (directories that vanish meanwhile are skipped)
        if EPOCHS_DONE_FILE in files:
            try:
                with open(os.path.join(folder, EPOCHS_DONE_FILE)) as f:
                    done = max(done, json.load(f)["epochs_done"])
            except (OSError, ValueError, KeyError):
                pass  # being written or removed
    return done


#: How `_kill_after_epoch` reports a kill that raised (not a command that failed).
KILL_FAILED = "kill failed: "


def _kill_after_epoch(log: Path, leader: str, work: Path, kill, run) -> list:
    """Calls `kill` until it reports what it killed, once epoch KILL_AFTER_EPOCH is done: the
    step's log shows `leader`'s, or the replicas' backup in `work` holds it (whichever is seen
    first). Returns what it reported (empty if nothing was killed); a kill that failed other
    than as a command (`CalledProcessError`: the replica not there yet, tried again) is
    reported after `KILL_FAILED`, so that the test's assertion names it."""
    done = []

    def epoch_done() -> bool:
        text = log.read_text(errors="replace") if log.exists() else ""
        return (re.search(rf"\[{re.escape(leader)}\] epoch {KILL_AFTER_EPOCH}/", text) is not None
                or _epochs_backed_up(work) >= KILL_AFTER_EPOCH)

    def watch() -> None:
        deadline = time.monotonic() + 600
        while not done and time.monotonic() < deadline and run.poll() is None:
            if epoch_done():
                try:
                    what = kill()
                except subprocess.CalledProcessError:
                    what = ""
                except Exception as error:  # noqa: BLE001 (the watcher's thread would die silently)
                    what = f"{KILL_FAILED}{error!r}"
                if what:
                    done.append(what)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return done


def _completion_index(pod) -> str:
    return pod["metadata"].get("annotations", {}).get("batch.kubernetes.io/job-completion-index",
                                                      "")


@pytest.mark.parametrize("backend,strategy,leader,kill,extra", [
    # kfdist-tensorflow's pod failure policy: node 1 gets 137, node 0 loses its peer (138);
    # neither is permanent, so the Job controller re-creates both pods.
    ("trainjob", "multi_worker_mirrored", "node-0",
     lambda ns: " ".join(ns.kill_containers(lambda pod: _completion_index(pod) == "1")), ()),
    # Rank 1 is killed: mpirun fails, the launcher's container restarts in place (OnFailure)
    # and a new mpirun resumes from rank 0's backup.
    ("mpijob", "horovod", "launcher", lambda ns: _kill_mpi_rank(1, f"{MOUNT}/mpijob-horovod"),
     ("--restart-policy", "OnFailure")),
])
def test_a_killed_replica_is_replaced_by_the_real_controllers_and_the_job_resumes(
        backend, strategy, leader, kill, extra, bed_namespace, work_pvc, kfdist_images,
        tmp_path):
    out = tmp_path / "run"
    run = _run(bed_namespace, out, backend, strategy, *extra, epochs=EPOCHS, popen=True)
    killed = _kill_after_epoch(out / "logs" / "train.log", leader,
                               work_pvc / f"{backend}-{strategy.replace('_', '-')}",
                               lambda: kill(bed_namespace), run)
    output, _ = run.communicate(timeout=1200)
    assert killed and not killed[0].startswith(KILL_FAILED), (killed, output[-3000:])
    assert run.returncode == 0, output[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["blessed"] is True
    step_log = (out / "logs" / "train.log").read_text()
    assert "resuming from the backup" in step_log, step_log[-4000:]
    assert summary["train"]["restarts"] >= 1, step_log[-3000:]


def _written_program(tmp_path, files: dict):
    """A program's folder holding `files` ({name: text})."""
    folder = tmp_path / "program"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


#: Says which user runs the rank and its container's first process (the worker's sshd, which
#: writes its state into its command line), then runs the allreduce program.
WHOAMI_PROGRAM = """
import os, runpy
with open("/proc/1/cmdline", "rb") as f:
    first = os.path.basename(f.read().split(b"\\0")[0].decode().split()[0]).rstrip(":")
with open("/proc/1/status") as f:
    owner = next(line.split()[1] for line in f if line.startswith("Uid:"))
print(f"uid {os.getuid()} under {first} of uid {owner}", flush=True)
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "allreduce.py"),
               run_name="__main__")
"""


def test_an_mpi_program_runs_as_an_mpijob(bed_namespace, kfdist_images, tmp_path):
    """`kfdist launch --mpi --backend mpijob`: the MPI Operator's launcher runs mpirun over the
    workers' sshd (kfdist's Horovod image, the default with --program-dir); its log carries
    every rank's lines."""
    from component.test_launch_local import HOROVOD_PROGRAM

    ns = bed_namespace
    pvc, flags = _cluster_flags(ns, "hvd", "mpijob")
    program = _written_program(tmp_path, {"allreduce.py": HOROVOD_PROGRAM,
                                          "whoami.py": WHOAMI_PROGRAM})
    done = _launch("--framework", "tensorflow", "--mpi", "--workers", "2", "--output",
                   str(pvc / "hvd"), "--program-dir", str(program), *flags, "--", "python",
                   "whoami.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 1 of 2 sum 3.0" in done.stdout and "rank 0 of 2 sum 3.0" in done.stdout
    # Each rank ran as the image's user under its worker's sshd, which is not root either.
    assert done.stdout.count("uid 1000 under sshd of uid 1000") == 2, done.stdout[-3000:]
    assert (pvc / "hvd" / "model" / "sum.txt").read_text() == "3.0"
    job = ns.get("mpijob", "hvd")
    assert ("Succeeded", "MPIJobSucceeded") in _conditions(job)
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "image"] == kfdist_images["horovod"]


def test_the_tf1_parameter_server_example_runs_as_a_tfjob_with_a_ps(bed_namespace,
                                                                     kfdist_images, tmp_path):
    """Between-graph replication: worker 0 decides the job; the parameter server, which never
    ends by itself, is then deleted by the operator (cleanPodPolicy Running)."""
    ns = bed_namespace
    pvc, flags = _cluster_flags(ns, "tf1-ps", "tfjob")
    program = _program(tmp_path, "tf1_parameter_server.py")
    done = _launch("--framework", "tensorflow", "--workers", "2", "--ps", "1", "--output",
                   str(pvc / "tf1"), "--program-dir", str(program), *flags, "--", "python",
                   "tf1_parameter_server.py", "--steps", "200")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    weights = json.loads((pvc / "tf1" / "model" / "weights.json").read_text())
    assert abs(weights["w"] - 3) < 0.3 and abs(weights["b"] - 2) < 0.3, weights
    job = ns.get("tfjob", "tf1-ps")
    assert set(job["spec"]["tfReplicaSpecs"]) == {"Worker", "PS"}
    assert ("Succeeded", "TFJobSucceeded") in _conditions(job)
    assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    wait_for(lambda: not [p for p in ns.get("pod") if p["metadata"]["name"] == "tf1-ps-ps-0"
                          and p["status"].get("phase") == "Running"], seconds=60,
             what="the parameter server to be ended")


def test_a_shipped_program_runs_as_a_pytorchjob_without_an_image(bed_namespace, kfdist_images,
                                                                 tmp_path):
    """--program-dir through the PVC, run by kfdist's runtime image (no --image): each replica
    copies the program and runs the user's command in it; the master's log is streamed."""
    ns = bed_namespace
    pvc, flags = _cluster_flags(ns, "shipped", "pytorchjob")
    program = _written_program(tmp_path, {
        "train.py": "import os, helper\nprint('rank', os.environ['RANK'], 'helper', helper.VALUE, "
                    "flush=True)\n",
        "helper.py": "VALUE = 7\n"})
    done = _launch("--framework", "pytorch", "--workers", "2", "--output", str(pvc / "shipped"),
                   "--program-dir", str(program), *flags, "--", "python", "train.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[master-0] rank 0 helper 7" in done.stdout
    assert (pvc / "shipped" / "program" / "helper.py").is_file()
    job = ns.get("pytorchjob", "shipped")
    assert ("Succeeded", "PyTorchJobSucceeded") in _conditions(job)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["template"]["spec"]["containers"][0]["image"] == kfdist_images["runtime"]


FAILING_PROGRAM = """
import json, os, sys, time
if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
    print("worker 1 about to fail", flush=True)
    sys.exit("boom on worker 1")
time.sleep(120)
"""


def test_a_failing_replica_fails_the_launch_with_the_operators_reason_and_its_last_lines(
        bed_namespace, kfdist_images, tmp_path):
    """restartPolicy Never: the Training Operator fails the TFJob; kfdist names its reason, the
    replica's container state and the replica's last lines, and keeps the failed job."""
    ns = bed_namespace
    pvc, cluster = _cluster_flags(ns, "fails", "tfjob")
    program = _written_program(tmp_path, {"fail.py": FAILING_PROGRAM})
    done = _launch("--framework", "tensorflow", "--workers", "2", "--restart-policy", "Never",
                   "--output", str(pvc / "fails"), "--program-dir", str(program), *cluster, "--",
                   "python", "fail.py")
    assert done.returncode != 0
    message = done.stderr
    assert (f"TFJob {ns.name}/fails failed: Failed (TFJobFailed): TFJob {ns.name}/fails has "
            "failed because 1 Worker replica(s) failed.") in message, message[-3000:]
    assert "worker-1: container tensorflow terminated: Error (exit code 1)" in message
    assert "Last lines of worker-1:" in message and "worker 1 about to fail" in message, message
    assert "Traceback" not in message
    assert ("Failed", "TFJobFailed") in _conditions(ns.get("tfjob", "fails"))
    # cleanPodPolicy Running: worker 0, still running, is deleted; the failed one is kept.
    wait_for(lambda: [p["metadata"]["name"] for p in ns.get("pod")] == ["fails-worker-1"],
             seconds=90, what="only the failed replica's pod to be left")
