"""`kfdist launch` against the real control plane: the Training Operator's own controller turns
the TFJob into pods and Services, the genuine node runs them as containers of kfdist's runtime
image, and `kfdist launch` runs with the pipeline runner's ServiceAccount token (manifests/base).

The PVC `team-work` is the node's directory for that claim; `--pvc-mount-path` is that same
directory, so the launcher (here) and the replicas (in their containers) see one path.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from component.test_launch_examples import _saved_model_predicts
from cluster import node
from cluster.fixture import wait_for

pytestmark = pytest.mark.slow
EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")
CLAIM = "team-work"


def _launch(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfdist", "launch", *args], capture_output=True,
                          text=True, timeout=timeout)


def _cluster_flags(ns, name: str, backend: str):
    pvc = ns.claim_path(CLAIM)
    return pvc, ["--backend", backend, "--name", name, "--namespace", ns.name,
                 "--pvc-name", CLAIM, "--pvc-mount-path", str(pvc), "--timeout", "500"]


def _program_of(tmp_path, name: str, text: str):
    """A program folder holding one file `name` with `text`."""
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / name).write_text(text)
    return folder


def _without_kfdists_own_env(monkeypatch) -> None:
    """This test process without the variables kfdist chooses for its own replicas only (as a
    user's shell has them), so a local launch shows what kfdist itself adds."""
    from kfdist.components.common.own_env import OWN_ENV

    for variable in OWN_ENV:
        monkeypatch.delenv(variable, raising=False)


def _program(tmp_path, example: str):
    folder = tmp_path / "program"
    folder.mkdir()
    shutil.copy(os.path.join(EXAMPLES, example), folder / example)
    return folder


@pytest.mark.parametrize("backend", ["tfjob", "trainjob"])
def test_tf2_example_trains_on_the_operators_own_controllers(backend, node_namespace,
                                                             kfdist_images, tmp_path):
    """TF_CONFIG from the Training Operator (TFJob), or derived by each replica from its JobSet
    name (TrainJob on kfdist-tensorflow: Trainer makes the JobSet, JobSet the Jobs, the Job
    controller the pods); the chief saves the SavedModel on the PVC."""
    ns = node_namespace
    pvc, flags = _cluster_flags(ns, "tf2", backend)
    program = _program(tmp_path, "tf2_multi_worker_custom_loop.py")
    done = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(pvc / "tf2"),
                   "--program-dir", str(program), *flags, "--", "python",
                   "tf2_multi_worker_custom_loop.py", "--steps", "60")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert abs(_saved_model_predicts(pvc / "tf2" / "model", 1.0) - 5.0) < 0.5
    job = ns.get(backend, "tf2")  # its status is the operator's own
    done_when = {"tfjob": ("Succeeded", "TFJobSucceeded"), "trainjob": ("Complete", None)}
    kind, reason = done_when[backend]
    assert any(c["type"] == kind and c["status"] == "True" and reason in (None, c["reason"])
               for c in job["status"]["conditions"]), job["status"]
    if backend == "tfjob":
        assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    else:
        assert job["spec"]["runtimeRef"]["name"] == "kfdist-tensorflow"
        [jobset] = ns.get("jobset")
        assert jobset["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]


@pytest.mark.parametrize("backend", ["tfjob", "trainjob"])
def test_sigterm_to_launch_deletes_the_job_and_its_pods(backend, node_namespace, kfdist_images,
                                                        tmp_path):
    """SIGTERM once the leader runs: the job is deleted (a TrainJob's JobSet and Jobs with it,
    by the real garbage collector) and its pods go; `kfdist launch` exits 143."""
    ns = node_namespace
    pvc, flags = _cluster_flags(ns, "forever", backend)
    program = _program_of(tmp_path, "forever.py",
                          "import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow", "--workers", "2",
         "--output", str(pvc / "run"), "--program-dir", str(program), *flags, "--", "python",
         "forever.py"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = time.monotonic()
        for line in proc.stdout:  # the chief's log, streamed through pods/log once it runs
            if line.rstrip().endswith("] up"):
                break
        assert time.monotonic() - started < 400
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "stopped by SIGTERM" in proc.stderr.read()
    assert ns.kubectl("get", backend, "forever", check=False).returncode != 0
    wait_for(lambda: not ns.get("pod") and not ns.get("jobset"), seconds=90,
             what="the job's JobSet and pods to go")


def test_the_pipeline_runner_can_do_what_kfdist_needs_and_no_more(node_bed, node_namespace):
    ns = node_namespace

    def can(verb: str, resource: str, namespace: str = ns.name) -> bool:
        answer = node_bed.kubectl_run("auth", "can-i", verb, resource, f"--namespace={namespace}",
                                      kubeconfig=ns.kubeconfig, check=False)
        return answer.stdout.strip() == "yes"

    for verb, resource in (("create", "tfjobs.kubeflow.org"), ("watch", "tfjobs.kubeflow.org"),
                           ("create", "pytorchjobs.kubeflow.org"),
                           ("delete", "tfjobs.kubeflow.org"), ("create", "mpijobs.kubeflow.org"),
                           ("create", "trainjobs.trainer.kubeflow.org"), ("list", "pods"),
                           ("watch", "pods"), ("get", "pods/log"), ("list", "events")):
        assert can(verb, resource), f"{verb} {resource}"
    for verb, resource in (("get", "secrets"), ("list", "secrets"), ("create", "pods"),
                           ("delete", "pods"), ("update", "tfjobs.kubeflow.org"),
                           ("create", "rolebindings.rbac.authorization.k8s.io")):
        assert not can(verb, resource), f"{verb} {resource}"
    assert not can("create", "tfjobs.kubeflow.org", namespace="default")
    # The cluster-scoped reads of `auto` (manifests/runtimes): by name, nothing listed.
    for runtime in ("kfdist-tensorflow", "kfdist-horovod", "torch-distributed"):
        assert can("get", f"clustertrainingruntimes.trainer.kubeflow.org/{runtime}"), runtime
    assert can("get", "customresourcedefinitions.apiextensions.k8s.io/trainjobs.trainer.kubeflow.org")
    assert not can("get", "clustertrainingruntimes.trainer.kubeflow.org/mpi-distributed")
    assert not can("list", "clustertrainingruntimes.trainer.kubeflow.org")
    assert not can("get", "customresourcedefinitions.apiextensions.k8s.io/tfjobs.kubeflow.org")
    # kfdist's own words for a refusal name the Role that grants the verb.
    done = _launch("--framework", "tensorflow", "--backend", "tfjob", "--image", "r/i:1",
                   "--name", "elsewhere", "--namespace", "default", "--workers", "1",
                   "--output", "gs://bucket/out", "--", "python", "x.py", timeout=120)
    assert done.returncode != 0
    assert "kfdist-pipeline-runner" in done.stderr and "Traceback" not in done.stderr, done.stderr


ENV_PROGRAM = """
import json, os, sys
task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
name = f"{task.get('type', 'single')}-{task.get('index', 0)}"
path = os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], "env", sys.argv[1], name + ".json")
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    json.dump(dict(os.environ), f)
print("wrote", name, flush=True)
"""


def _injected(env: dict) -> dict:
    """Variables a replica gets from kfdist or the operator: kfdist's and TensorFlow's, less what
    this machine's environment passes through to a local replica as it is."""
    return {k: v for k, v in env.items() if k.startswith(("KFDIST_", "TF_"))
            and os.environ.get(k) != v}


def test_a_program_sees_the_same_variables_locally_and_as_a_tfjob(node_namespace, kfdist_images,
                                                                  tmp_path, monkeypatch):
    """The same program, `--backend local` and `--backend tfjob` on the real operator: the same
    kfdist and TensorFlow variables, variable by variable (addresses apart), and none of kfdist's
    own choices (TF_USE_LEGACY_KERAS, TF_CPP_MIN_LOG_LEVEL) in either."""
    ns = node_namespace
    pvc, flags = _cluster_flags(ns, "envs", "tfjob")
    program = _program_of(tmp_path, "env_dump.py", ENV_PROGRAM)
    _without_kfdists_own_env(monkeypatch)
    local = _launch("--framework", "tensorflow", "--workers", "2", "--output",
                    str(tmp_path / "local"), "--", sys.executable, str(program / "env_dump.py"),
                    "local")
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    remote = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(pvc / "envs"),
                     "--program-dir", str(program), *flags, "--", "python", "env_dump.py",
                     "cluster")
    assert remote.returncode == 0, remote.stdout[-3000:] + remote.stderr[-3000:]

    def dumps(root, tag: str):
        found = {p.stem: json.loads(p.read_text()) for p in root.rglob("*.json")
                 if p.parent.name == tag and p.parent.parent.name == "env"}
        assert sorted(found) == ["worker-0", "worker-1"], sorted(found)
        return found

    here = dumps(tmp_path / "local", "local")
    there = dumps(pvc / "envs", "cluster")
    for replica in ("worker-0", "worker-1"):
        mine, theirs = _injected(here[replica]), _injected(there[replica])
        assert "TF_USE_LEGACY_KERAS" not in mine and "TF_USE_LEGACY_KERAS" not in theirs
        assert "TF_CPP_MIN_LOG_LEVEL" not in mine and "TF_CPP_MIN_LOG_LEVEL" not in theirs
        assert sorted(mine) == sorted(theirs), (replica, sorted(mine), sorted(theirs))
        local_config, cluster_config = (json.loads(e["TF_CONFIG"]) for e in (mine, theirs))
        assert local_config["task"] == cluster_config["task"]
        assert {k: len(v) for k, v in local_config["cluster"].items()} == \
            {k: len(v) for k, v in cluster_config["cluster"].items()}



@pytest.mark.parametrize("backend,launcher", [
    ("pytorchjob", ["python"]), ("trainjob", ["python", "-m", "torch.distributed.run"])])
def test_pytorch_ddp_example_trains_on_the_operators_own_controllers(
        backend, launcher, node_namespace, pytorch_image, tmp_path):
    """A PyTorchJob of the Training Operator (MASTER_ADDR, RANK, WORLD_SIZE; its init container
    waits for the master's name), or a TrainJob on Trainer's own torch-distributed runtime (PET_*
    for torchrun): DDP over gloo between the replicas' containers."""
    import torch

    ns = node_namespace
    node.import_images(ns.bed, [pytorch_image])
    name = f"ddp-{backend}"
    pvc, flags = _cluster_flags(ns, name, backend)
    program = _program(tmp_path, "pytorch_ddp.py")
    # The user's image runs as its own user, with no fsGroup from kfdist (not kfdist's image):
    # the team's output folder is one that user can write, as on a shared volume.
    (pvc / name).mkdir()
    (pvc / name).chmod(0o777)
    done = _launch("--framework", "pytorch", "--workers", "2", "--image", pytorch_image,
                   "--output", str(pvc / name), "--program-dir", str(program), *flags, "--",
                   *launcher, "pytorch_ddp.py", "--steps", "100")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "saved model.pt (world size 2)" in done.stdout  # the master's log, streamed
    weights = torch.load(pvc / name / "model" / "model.pt")
    assert abs(float(weights["weight"]) - 3) < 0.3 and abs(float(weights["bias"]) - 2) < 0.3
    job = ns.get(backend, name)
    expected = ("Succeeded", "PyTorchJobSucceeded") if backend == "pytorchjob" else \
        ("Complete", None)
    assert any(c["type"] == expected[0] and c["status"] == "True"
               and expected[1] in (None, c["reason"]) for c in job["status"]["conditions"])
    if backend == "trainjob":
        assert job["spec"]["runtimeRef"]["name"] == "torch-distributed"


#: What the Training Operator injects into a PyTorch replica, and kfdist's own variables.
PYTORCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_MASTER_ADDR",
                     "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
                     "PYTHONUNBUFFERED", "KFDIST_MODEL_DIR", "KFDIST_CHECKPOINT_DIR",
                     "KFDIST_DATA_DIR", "TF_CONFIG", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")
PYTORCH_ENV_PROGRAM = f"""
import json, os, time
names = {PYTORCH_VARIABLES!r}
path = os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], "env-" + os.environ["RANK"] + ".json")
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    json.dump({{n: os.environ[n] for n in names if n in os.environ}}, f)
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], flush=True)
# The job succeeds when the master does and the workers still running are then deleted: the
# master waits for every rank's file first.
deadline = time.monotonic() + 120
while os.environ["RANK"] == "0" and time.monotonic() < deadline and not all(
        os.path.exists(os.path.join(os.path.dirname(path), f"env-{{r}}.json"))
        for r in range(int(os.environ["WORLD_SIZE"]))):
    time.sleep(0.2)
"""


def test_a_pytorch_program_sees_the_same_variables_locally_and_as_a_pytorchjob(
        node_namespace, kfdist_images, tmp_path, monkeypatch):
    """The same program under `--backend local` and as a PyTorchJob of the real Training
    Operator sees the same variables; only the master's address and port differ."""
    ns = node_namespace
    pvc, flags = _cluster_flags(ns, "envcheck", "pytorchjob")
    program = _program_of(tmp_path, "env_program.py", PYTORCH_ENV_PROGRAM)
    _without_kfdists_own_env(monkeypatch)
    layout = ["--framework", "pytorch", "--workers", "2"]
    local = _launch(*layout, "--output", str(tmp_path / "local"), "--", sys.executable,
                    str(program / "env_program.py"))
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    remote = _launch(*layout, "--output", str(pvc / "run"), "--program-dir", str(program),
                     *flags, "--", "python", "env_program.py")
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
        assert "TF_USE_LEGACY_KERAS" not in here and "TF_CONFIG" not in here


def test_auto_picks_trainers_torch_distributed_runtime_only_where_it_is_installed(
        node_bed, node_namespace, tmp_path):
    """`--backend auto` for PyTorch: a TrainJob on Trainer's own `torch-distributed` runtime
    while the runner may read it, a PyTorchJob once it is gone (put back afterwards)."""
    from cluster import operator_sources

    ns = node_namespace
    _, flags = _cluster_flags(ns, "auto-pt", "auto")

    def dry_run() -> str:
        done = _launch("--framework", "pytorch", "--workers", "2", "--output",
                       str(ns.claim_path(CLAIM) / "auto"), *flags, "--image",
                       "registry.example.com/team/trainer:1.0", "--dry-run", "--", "python",
                       "-m", "torch.distributed.run", "train.py")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    shown = dry_run()
    assert "backend auto: trainjob (Kubeflow Trainer and its torch-distributed runtime" in shown
    assert "kind: TrainJob" in shown
    runtime = operator_sources.TRAINER.source() / "manifests" / "base" / "runtimes" / \
        "torch_distributed.yaml"
    node_bed.kubectl_run("delete", "clustertrainingruntime", "torch-distributed")
    try:
        shown = dry_run()
    finally:
        node_bed.kubectl_run("apply", "--server-side", f"--filename={runtime}")
    assert "backend auto: pytorchjob (Kubeflow Trainer or its runtime torch-distributed is not" \
        in shown and "kind: PyTorchJob" in shown
    assert ns.get("pytorchjob") == [] and ns.get("trainjob") == []  # a dry run creates nothing


def test_a_killed_keras_worker_pod_is_recreated_and_the_job_resumes_from_the_pvc(
        node_namespace, kfdist_images, digits_dataset, tmp_path):
    """The Keras example reads its dataset on the PVC (`--dataset`); under ExitCode, worker 1's
    container SIGKILLed (137) gets a new pod from the real Training Operator, worker 0 loses its
    peer (138, retryable: a new pod too), and both resume from the BackupAndRestore backup in
    KFDIST_CHECKPOINT_DIR instead of epoch 1."""
    from component.test_launch_examples import _eval_accuracy

    ns = node_namespace
    pvc, flags = _cluster_flags(ns, "keras-kill", "tfjob")
    shutil.copytree(digits_dataset, pvc / "data" / "digits")
    program = _program(tmp_path, "keras_fit_backup_restore.py")
    argv = [sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow", "--workers",
            "2", "--restart-policy", "ExitCode", "--output", str(pvc / "keras"), "--dataset",
            str(pvc / "data" / "digits"), "--program-dir", str(program), *flags, "--", "python",
            "keras_fit_backup_restore.py", "--epochs", "4", "--steps-per-epoch", "50"]
    lines, killed = [], False
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as job:
        for line in job.stdout:
            lines.append(line.rstrip("\n"))
            if not killed and line.startswith("[worker-0] Epoch 2/4"):
                killed = bool(ns.kill_containers(
                    lambda p: p["metadata"]["name"] == "keras-kill-worker-1"))
        assert job.wait(timeout=600) == 0, "\n".join(lines[-60:])
    output = "\n".join(lines)
    assert killed, output[-3000:]
    after_kill = output[output.index("[worker-0] Epoch 2/4"):]
    assert "[worker-0] Epoch 1/4" not in after_kill, output[-4000:]  # resumed, not restarted
    assert "[worker-0] Epoch 4/4" in after_kill
    assert "Restarting (TFJobRestarting)" in output, output[-4000:]
    job = ns.get("tfjob", "keras-kill")
    assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    assert _eval_accuracy(pvc / "keras" / "model", digits_dataset) > 0.8
