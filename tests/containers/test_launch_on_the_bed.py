"""`kfdist launch` against the real control plane: the Training Operator's own controller turns
the TFJob into pods and Services, the node agent runs them as containers of kfdist's runtime
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
from containers.test_cluster_bed import wait_for

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


def _program(tmp_path, example: str):
    folder = tmp_path / "program"
    folder.mkdir()
    shutil.copy(os.path.join(EXAMPLES, example), folder / example)
    return folder


def test_tf2_example_trains_as_a_tfjob_of_the_training_operator(bed_namespace, kfdist_images,
                                                                 tmp_path):
    ns = bed_namespace
    pvc, flags = _cluster_flags(ns, "tf2", "tfjob")
    program = _program(tmp_path, "tf2_multi_worker_custom_loop.py")
    done = _launch("--framework", "tensorflow", "--workers", "2", "--output", str(pvc / "tf2"),
                   "--program-dir", str(program), *flags, "--", "python",
                   "tf2_multi_worker_custom_loop.py", "--steps", "60")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert abs(_saved_model_predicts(pvc / "tf2" / "model", 1.0) - 5.0) < 0.5
    job = ns.get("tfjob", "tf2")  # its status is the Training Operator's own
    succeeded = [c for c in job["status"]["conditions"] if c["type"] == "Succeeded"]
    assert succeeded and succeeded[0]["status"] == "True"
    assert succeeded[0]["reason"] == "TFJobSucceeded"
    assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2


def test_sigterm_to_launch_deletes_the_tfjob_and_its_pods(bed_namespace, kfdist_images, tmp_path):
    ns = bed_namespace
    pvc, flags = _cluster_flags(ns, "forever", "tfjob")
    program = tmp_path / "program"
    program.mkdir()
    (program / "forever.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(600)\n")
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
    assert ns.kubectl("get", "tfjob", "forever", check=False).returncode != 0
    wait_for(lambda: not ns.get("pod"), seconds=90, what="the job's pods to go")


def test_the_pipeline_runner_can_do_what_kfdist_needs_and_no_more(kube_bed, bed_namespace):
    ns = bed_namespace

    def can(verb: str, resource: str, namespace: str = ns.name) -> bool:
        answer = kube_bed.kubectl_run("auth", "can-i", verb, resource, f"--namespace={namespace}",
                                      kubeconfig=ns.kubeconfig, check=False)
        return answer.stdout.strip() == "yes"

    for verb, resource in (("create", "tfjobs.kubeflow.org"), ("watch", "tfjobs.kubeflow.org"),
                           ("delete", "tfjobs.kubeflow.org"), ("create", "mpijobs.kubeflow.org"),
                           ("create", "trainjobs.trainer.kubeflow.org"), ("list", "pods"),
                           ("watch", "pods"), ("get", "pods/log"), ("list", "events")):
        assert can(verb, resource), f"{verb} {resource}"
    for verb, resource in (("get", "secrets"), ("list", "secrets"), ("create", "pods"),
                           ("delete", "pods"), ("update", "tfjobs.kubeflow.org"),
                           ("create", "rolebindings.rbac.authorization.k8s.io")):
        assert not can(verb, resource), f"{verb} {resource}"
    assert not can("create", "tfjobs.kubeflow.org", namespace="default")
    # kfdist's own words for a refusal name the Role that grants the verb.
    done = _launch("--framework", "tensorflow", "--backend", "tfjob", "--image", "r/i:1",
                   "--name", "elsewhere", "--namespace", "default", "--workers", "1",
                   "--output", "gs://bucket/out", "--", "python", "x.py", timeout=120)
    assert done.returncode != 0
    assert "kfdist-pipeline-runner" in done.stderr and "Traceback" not in done.stderr, done.stderr
