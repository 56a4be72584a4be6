"""`kfdist launch --backend ...` where no cluster is needed: an output the replicas cannot reach is
refused before anything is created, and `auto` without any Kubernetes API runs locally. Every
claim about a cluster (the examples as TFJobs, PyTorchJobs, MPIJobs and TrainJobs, the variables
side by side with a local run, `auto`'s choice for PyTorch, the dataset on the PVC, a killed
Keras worker) runs on the real control plane: tests/containers/test_launch_on_the_bed.py and
test_cluster_claims_on_the_bed.py.
"""

from __future__ import annotations

import subprocess
import sys


def _launch(*args, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfdist", "launch", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_a_cluster_backend_refuses_an_output_the_replicas_cannot_reach(tmp_path):
    done = _launch("--framework", "pytorch", "--backend", "pytorchjob", "--image", "r/i:1",
                   "--name", "ddp", "--output", str(tmp_path / "out"), "--", "python", "x.py")
    assert done.returncode == 2
    assert (f"--output '{tmp_path / 'out'}' is not where the replicas can reach it: pass a gs://, "
            "s3:// or minio:// URI, or a path under /mnt/kfdist/ with --pvc-name CLAIM"
            ) in done.stderr


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
