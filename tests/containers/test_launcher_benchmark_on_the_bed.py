"""The launcher benchmark against the real control plane (the session's test bed): the
Training Operator's own controller writes every condition the launcher reacts to, its replicas
run by the genuine node."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_launcher_benchmark_runs_on_the_bed_and_writes_results(node_bed, kfdist_images,
                                                                   tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", "launcher",
                           "--kubeconfig", str(node_bed.kubeconfig), "--out-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "results-quick.json").read_text())
    launcher = result["measures"]["launcher"]
    assert launcher["cluster"] == "given kubeconfig" and launcher["jobs"] == 2
    assert launcher["kfdist"]["api_requests_per_job"] <= 12
    assert launcher["kfdist"]["reaction_seconds_max"] < 1.0
    assert 0 < launcher["kfdist"]["startup_seconds_min"] <= launcher["kfdist"]["startup_seconds_max"]
    assert "| launcher |" in (tmp_path / "results-quick.md").read_text()
