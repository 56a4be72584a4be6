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

from cluster import crds, operator_sources
from cluster.fixture import REPO

pytestmark = pytest.mark.slow

TESTS = REPO / "tests"
#: How long Argo's executor may take to notice KFP's launcher has ended (it polls each second).
EMISSARY_POLL_S = 1.0

STEP = textwrap.dedent("""
    import sys
    from fakes.kube_server.sample_jobs import sample_tfjob
    from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
    from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import (
        cancel_on_sigterm, launch_and_wait)

    with cancel_on_sigterm():
        launch_and_wait(sample_tfjob(*sys.argv[1:]), KubeApi.from_environment(),
                        timeout_seconds=None, log=print, owner=None)
""")


def test_a_step_whose_log_reader_died_of_the_same_sigterm_still_deletes_its_job(
        bare_api, bare_namespace):
    training_crds = operator_sources.TRAINING_OPERATOR.source() / "manifests" / "base" / "crds"
    crds.install(bare_api, [training_crds / "kubeflow.org_tfjobs.yaml"])
    step = subprocess.Popen([sys.executable, "-c", STEP, "stopped", bare_namespace.name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(TESTS)})
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


