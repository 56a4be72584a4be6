"""A training step stopped the way Argo stops a KFP step deletes its job, on a real API server.

Argo's executor sends SIGTERM to the step's whole process group: KFP's launcher, which reads
the step's output through a pipe, dies of it at once; about a second later the container's
first process exits and the kernel kills whatever is left. So the step's log reader is gone
when its cleanup runs, and the cleanup has that second. (The run terminated through KFP's API
on the genuine node, tests/containers/test_kfp_cluster_backends.py, is the whole story; here
the order is fixed, so the test fails every time the cleanup depends on its reader.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from cluster import operators
from cluster.fixture import wait_for

pytestmark = pytest.mark.slow

#: How long Argo's executor may take to notice KFP's launcher has ended (it polls each second).
EMISSARY_POLL_S = 1.0

STEP = textwrap.dedent("""
    import sys
    from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob, TFJOB_V1
    from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
    from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import (
        cancel_on_sigterm, launch_and_wait)

    name, namespace = sys.argv[1:]
    replica = {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "kfdist-runtime", "command": ["sleep", "infinity"]}]}}}
    body = {"apiVersion": TFJOB_V1.api_version, "kind": TFJOB_V1.kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"tfReplicaSpecs": {"Worker": replica}}}
    job = RenderedJob(TFJOB_V1, name, namespace, body,
                      {"training.kubeflow.org/job-name": name})
    with cancel_on_sigterm():
        launch_and_wait(job, KubeApi.from_environment(), timeout_seconds=None, log=print,
                        owner=None)
""")


def test_a_step_whose_log_reader_died_of_the_same_sigterm_still_deletes_its_job(
        bare_api, bare_namespace):
    crd = operators.TRAINING_OPERATOR.source() / "manifests/base/crds/kubeflow.org_tfjobs.yaml"
    bare_api.kubectl_run("apply", "--server-side", f"--filename={crd}")
    wait_for(lambda: _established(bare_api, "tfjobs.kubeflow.org"), 60,
             "the TFJob CRD established")
    step = subprocess.Popen([sys.executable, "-c", STEP, "stopped", bare_namespace.name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    watchdog = threading.Timer(120, step.kill)  # a step that never creates its job
    watchdog.start()
    try:
        for line in step.stdout:
            if line.startswith("Created TFJob"):
                break
        assert step.poll() is None, step.stderr.read()[-3000:]
        step.stdout.close()  # the launcher is gone (no operator runs: the job never ends)
        step.send_signal(signal.SIGTERM)
        try:
            step.wait(EMISSARY_POLL_S)
        except subprocess.TimeoutExpired:
            step.kill()  # the container's first process has exited: the kernel ends the rest
        errors = step.stderr.read()
    finally:
        watchdog.cancel()
        if step.poll() is None:
            step.kill()
        step.wait()
    jobs = json.loads(bare_namespace.kubectl("get", "tfjobs", "--output=json").stdout)["items"]
    assert [job["metadata"]["name"] for job in jobs] == [], errors[-3000:]
    assert "BrokenPipeError" not in errors, errors[-3000:]



def _established(bed, crd: str) -> bool:
    """Whether the API server serves the CRD `crd`."""
    conditions = json.loads(bed.kubectl_run("get", f"crd/{crd}", "--output=json").stdout).get(
        "status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
