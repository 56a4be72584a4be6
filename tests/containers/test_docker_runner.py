"""`kfdist run mnist --runner docker`: each step in the runtime image, as Kubeflow Pipelines runs it.

kfp.local's DockerRunner talks to the Docker API that kfdist starts with `podman system service`;
every step runs in ghcr.io/kfdist/kfdist-runtime (built from containers/ by the fixture) as the
image's user, uid 1000. The run is judged by what the steps wrote, not by the runner's status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kfdist
from kfdist import docker_run
from kfdist.components.common.errors import TrainingFailedError
from kfdist.run_summary import check_outputs

from containers.conftest import containers_labelled, podman_services

STOP_SECONDS = 60


def _kfdist_run(output: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfdist", "run", "mnist", "--output", str(output),
                           "--runner", "docker", *extra], capture_output=True, text=True,
                          timeout=900)


def _owners(root: Path) -> set:
    """Owners of the steps' files (kfp.local's own cache, written on this side, left out)."""
    return {p.stat().st_uid for p in root.rglob("*")
            if p.is_file() and ".kfp_cache" not in p.relative_to(root).parts}


def test_mnist_runs_every_step_in_the_runtime_image(kfdist_images, podman, tmp_path):
    output = tmp_path / "run"
    result = _kfdist_run(output)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((output / "summary.json").read_text())
    assert summary["eval"]["accuracy"] >= 0.90 and summary["blessed"]
    exported = Path(summary["export"]["path"])
    assert (exported / "saved_model.pb").is_file() and (exported / "variables").is_dir()
    # Each step ran in the image (its log says which), as the image's user: uid 1000 wrote
    # every file of every step (kfdist gives that user the run's directories when it is root).
    # Each step's whole log came through, to the executor's last line (Podman removed a quick
    # step's container, and its log, before the log was read, until kfdist's relay).
    logs = output / "logs"
    expected = kfdist.IMAGE_UID if os.geteuid() == 0 else os.geteuid()
    for step in ("shard", "train", "evaluate", "export"):
        text = (logs / f"{step}.log").read_text()
        assert f"Found image '{kfdist_images['runtime']}'" in text
        assert "INFO]: Wrote executor output file to" in text, text[-2000:]
    assert _owners(output / "pipeline_root") == {expected}
    assert _owners(exported) == {expected}
    # Nothing is left behind: no container of the run, no Docker API service.
    assert containers_labelled(podman, docker_run.RUN_LABEL) == []
    assert podman_services() == []


def test_a_runner_success_without_outputs_is_a_failure(tmp_path):
    """DockerRunner reports SUCCESS for a container that vanished; the outputs decide."""
    from kfp import dsl

    model = dsl.Model(name="model", uri=str(tmp_path / "never-written"))
    metrics = dsl.Metrics(name="training_metrics", uri=str(tmp_path / "metrics"))
    with pytest.raises(TrainingFailedError, match="'training_metrics' was not written"):
        check_outputs({"training_metrics": metrics, "blessed": True})
    metrics.metadata["accuracy"] = 0.9
    with pytest.raises(TrainingFailedError, match="'model' was not written.*never-written"):
        check_outputs({"training_metrics": metrics, "model": model})
    (tmp_path / "never-written").mkdir()
    check_outputs({"training_metrics": metrics, "model": model, "blessed": True})


def test_ctrl_c_removes_the_running_step_container(kfdist_images, podman, tmp_path):
    output = tmp_path / "run"
    log = tmp_path / "output.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kfdist", "run", "mnist", "--output", str(output), "--runner",
             "docker", "--epochs", "200", "--no-cache"], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600
        while "epoch 1/200" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        assert containers_labelled(podman, docker_run.RUN_LABEL), "no step container runs"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the whole group
        proc.wait(timeout=STOP_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert containers_labelled(podman, docker_run.RUN_LABEL) == []
    assert podman_services() == []
