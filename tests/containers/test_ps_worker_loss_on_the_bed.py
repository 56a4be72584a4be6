"""A parameter-server worker's container SIGKILLed mid-epoch in a TFJob of the real Training
Operator: its pod is re-created under ExitCode, the chief's coordinator re-runs the lost steps on
the other worker meanwhile and uses the worker again once it is back; no backup is restored, no
epoch redone (the same as locally: tests/e2e/test_ps_worker_loss.py).
"""

from __future__ import annotations

import pytest

from containers import test_run_on_the_bed as run_on_the_bed
from containers.test_cluster_claims_on_the_bed import _step_options
from e2e.test_ps_worker_loss import SETTINGS, KillWorkerOne, _check_the_chief_carried_on
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for

pytestmark = pytest.mark.slow
work_pvc = run_on_the_bed.work_pvc  # the PVC at /mnt/kfdist, as there


def test_a_killed_ps_worker_pod_is_recreated_and_the_chief_carries_on(
        bed_namespace, work_pvc, kfdist_images, digits_dataset, tmp_path):
    """Worker 1's container gets SIGKILL (137, retryable under ExitCode): the real Training
    Operator re-creates its pod; the chief and the PS are never restarted."""
    ns = bed_namespace
    name = job_name_for("run-ps-kill", "train-distributed")
    pod = f"{name}-worker-1"

    def kill_worker_1(_) -> None:
        assert ns.kill_containers(lambda p: p["metadata"]["name"] == pod), f"no {pod} running"

    log = KillWorkerOne(kill_worker_1)
    model_dir = str(tmp_path / "model")
    report = runtime.train(digits_dataset, model_dir, log=log,
                           **_step_options(ns, "run-ps-kill", **SETTINGS))
    _check_the_chief_carried_on(report, log, model_dir, digits_dataset)
    assert report.restarts == 1  # worker 1's pod, once
    [job] = ns.get("tfjob")
    assert ("Succeeded", "TFJobSucceeded") in run_on_the_bed._conditions(job)
