"""What the cluster runs, run here: the jobs `kfdist render` prints, their replicas as containers.

Each replica pod of the rendered TFJob or MPIJob becomes a container of the image it names, with
its command, args, env, securityContext and volume mounts, plus exactly what the operator adds
(`operators`): TF_CONFIG for a TFJob; the SSH Secret, the hostfile, sshd on the workers and
OpenMPI's variables for an MPIJob. The PVC work location is a host directory, given to the pods'
fsGroup as the kubelet does. The work files are staged by `kfdist render --stage` in the runtime
image, as the training step stages them in its pod.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import yaml

from kfdist.components.common import model_artifact
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.job import config

from containers.operators import mpijob_pods, tfjob_pods
from containers.pods import PodRunner, give_group

CLAIM, MOUNT = "kfdist-work", "/mnt/kfdist"
WORK_URI = f"{MOUNT}/work"
JOB_SECONDS = 600


def _render(digits_dataset: str, *flags: str) -> List[str]:
    return ["render", "--dataset", digits_dataset, "--namespace", "team", "--run-id", "ctest",
            "--pvc-name", CLAIM, "--work-uri", WORK_URI, "--epochs", "10", *flags]


def _render_and_stage(podman, kfdist_images, digits_dataset: str, pvc: Path, *flags) -> dict:
    """The job `kfdist render` prints here, staged onto the PVC by the same command in the image."""
    dataset = pvc.parent / "dataset"  # a copy the image's user may read
    shutil.copytree(digits_dataset, dataset)
    for path in [dataset, *dataset.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    digits_dataset = str(dataset)
    args = _render(digits_dataset, *flags)
    here = subprocess.run([sys.executable, "-m", "kfdist", *args], capture_output=True,
                          text=True, timeout=120)
    assert here.returncode == 0, here.stderr
    job = yaml.safe_load(here.stdout)
    pod = next(iter(job["spec"].get("tfReplicaSpecs", job["spec"].get("mpiReplicaSpecs"))
                    .values()))["template"]["spec"]
    group = pod["securityContext"]["fsGroup"]
    give_group(pvc, group)
    staged = subprocess.run(
        [podman, "run", "--rm", "--group-add", str(group), "--network", "none",
         "-v", f"{pvc}:{MOUNT}", "-v", f"{digits_dataset}:{digits_dataset}:ro",
         kfdist_images["runtime"], "kfdist", *args, "--stage"],
        capture_output=True, text=True, timeout=300)
    assert staged.returncode == 0, staged.stderr[-3000:]
    assert yaml.safe_load(staged.stdout) == job, "the image renders another job than this kfdist"
    return job


def _report(pvc: Path) -> model_artifact.TrainingReport:
    """The training report the step assembles from the work location after the job."""
    work = pvc / "work"
    job = config.JobConfig.read(str(work / "job.json"))
    return runtime.assemble_report(dataclasses.replace(job, work_dir=str(work / "reports"),
                                                       state_uri=None))


def _assert_model_complete(model: Path) -> None:
    for entry in (f"{model_artifact.SAVED_MODEL_DIR}/saved_model.pb",
                  f"{model_artifact.SERVING_MODEL_DIR}/saved_model.pb",
                  model_artifact.HISTORY_FILE, model_artifact.EVAL_PREDICTIONS_FILE,
                  model_artifact.DATASET_METADATA_FILE):
        assert (model / entry).is_file(), f"the Model artifact lacks {entry}"
    assert len(model_artifact.read_history(str(model))["loss"]) == 10


def _start_all(runner: PodRunner, pods) -> None:
    addresses = {name: runner.address(*names) for name, _, _, names in pods}
    for name, pod, env, _ in pods:
        runner.start(name, pod, env=env, ip=addresses[name])


def test_rendered_tfjob_replicas_train_as_containers(kfdist_images, podman, digits_dataset,
                                                     tmp_path):
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    job = _render_and_stage(podman, kfdist_images, digits_dataset, pvc, "--backend", "tfjob",
                            "--strategy", "multi_worker_mirrored", "--workers", "2")
    pods = tfjob_pods(job)
    assert [p[0] for p in pods] == [f"{job['metadata']['name']}-worker-{i}" for i in (0, 1)]
    assert all(p[1]["containers"][0]["image"] == kfdist_images["runtime"] for p in pods)
    runner = PodRunner(podman, tmp_path / "objects", {CLAIM: pvc}, {})
    with runner.running():
        _start_all(runner, pods)
        codes = {name: runner.wait(name, JOB_SECONDS) for name, *_ in pods}
        logs = "\n".join(f"--- {n}\n{runner.logs(n)[-3000:]}" for n in codes)
        assert codes == {name: 0 for name in codes}, logs
    report = _report(pvc)
    assert report.final_val_accuracy >= 0.90, logs
    assert [r.num_replicas_in_sync for r in report.replicas] == [2, 2]
    assert len({r.weights_sha256 for r in report.replicas}) == 1
    _assert_model_complete(pvc / "work" / "model")
    # Written as the image's user, through the pods' fsGroup.
    assert {p.stat().st_uid for p in (pvc / "work" / "model").rglob("*")} == {1000}


def _wait_for_sshd(address: str, timeout: float = 120) -> None:
    """The workers' readiness, which `WaitForWorkersReady` waits for: sshd accepts connections."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, 2222), timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"no sshd on {address}:2222"
            time.sleep(0.5)


def test_rendered_mpijob_runs_mpirun_over_ssh_between_containers(kfdist_images, podman,
                                                                 digits_dataset, tmp_path):
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    job = _render_and_stage(podman, kfdist_images, digits_dataset, pvc, "--backend", "mpijob",
                            "--strategy", "horovod", "--workers", "2", "--batch-size", "32")
    pods, objects = mpijob_pods(job)
    assert all(p[1]["containers"][0]["image"] == kfdist_images["horovod"] for p in pods)
    assert job["spec"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    runner = PodRunner(podman, tmp_path / "objects", {CLAIM: pvc}, objects)
    (launcher, *_), workers = pods[0], pods[1:]
    with runner.running():
        addresses = {name: runner.address(*names) for name, _, _, names in pods}
        for name, pod, env, _ in workers:
            runner.start(name, pod, env=env, ip=addresses[name])
        for name, *_ in workers:
            _wait_for_sshd(addresses[name])
        runner.start(launcher, pods[0][1], env=pods[0][2], ip=addresses[launcher])
        code = runner.wait(launcher, JOB_SECONDS)
        logs = runner.logs(launcher)[-5000:]
        assert code == 0, logs
        # The workers' sshd ran as the image's user, not as root.
        top = subprocess.run([podman, "top", workers[0][0], "user", "args"], capture_output=True,
                             text=True, timeout=60).stdout
        assert "sshd" in top and "root" not in top, top
    report = _report(pvc)
    assert report.final_val_accuracy >= 0.90, logs
    # Two ranks, one in each worker container, whose gradients were averaged: identical weights.
    assert [r.num_replicas_in_sync for r in report.replicas] == [2, 2]
    assert len({r.weights_sha256 for r in report.replicas}) == 1, report.replicas
    _assert_model_complete(pvc / "work" / "model")
