"""`kfdist run tabular` reads its source from `s3://` and exports the model there, against a real
S3 server (MinIO) configured only by the `AWS_*` variables, as on Kubeflow Pipelines' MinIO.

scikit-learn's wine table is written to CSV and uploaded; one run trains on it for two epochs
and exports under an `s3://` export base; a second run checks its data against the first run's
dataset, uploaded and named by a `minio://` `--reference-dataset`; `kfdist tensorboard` serves
the first run's curves from `s3://`.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from cluster.processes import free_port
from kfdist.components.common import storage

pytestmark = pytest.mark.slow
BUCKET = "kfdist-e2e"
SOURCE = f"s3://{BUCKET}/tables/wine/wine.csv"
EXPORT_BASE = f"s3://{BUCKET}/serving"
QUICK = ["--label-column", "target", "--strategy", "mirrored", "--epochs", "2",
         "--accuracy-threshold", "0.0"]


def _run(out, *extra: str) -> dict:
    """Runs the pipeline; returns its summary."""
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "tabular", "--data", SOURCE,
                           *QUICK, "--export-base", EXPORT_BASE, "--output", str(out), *extra],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return json.loads((out / "summary.json").read_text())


@pytest.fixture
def wine_on_s3(s3_server, tmp_path):
    from sklearn.datasets import load_wine

    if BUCKET not in [b["Name"] for b in s3_server.client().list_buckets()["Buckets"]]:
        s3_server.create_bucket(BUCKET)
    table = load_wine(as_frame=True).frame
    path = tmp_path / "wine.csv"
    table.to_csv(path, index=False)
    storage.upload_file(str(path), SOURCE)
    return s3_server


def test_a_run_reads_s3_and_exports_there(wine_on_s3, tmp_path):
    out = tmp_path / "run"
    summary = _run(out)
    assert summary["data"] == SOURCE and summary["blessed"]
    assert summary["export"]["path"].startswith(f"{EXPORT_BASE}/wine/")
    exported = wine_on_s3.list(f"{EXPORT_BASE}/wine/")
    versions = {uri[len(f"{EXPORT_BASE}/wine/"):].split("/")[0] for uri in exported}
    assert len(versions) == 1 and versions.pop().isdigit(), exported
    names = {uri.split("/", 6)[-1] for uri in exported}
    for name in ("saved_model.pb", "variables/variables.index"):
        assert name in names, names
    assert not os.path.exists(out / "serving")  # nothing exported locally
    # The dataset it made, uploaded as a reference for the next run's data (minio:// names the
    # same store).
    [metadata] = glob.glob(str(out / "pipeline_root" / "**" / "shard-dataset" / "**" /
                               "metadata.json"), recursive=True)
    reference = f"minio://{BUCKET}/reference/wine"
    storage.copy_dir_to(os.path.dirname(metadata), reference)
    second = _run(tmp_path / "second", "--reference-dataset", reference)
    assert len(second["data_validation"]["drifts"]) == 13, second  # every wine column compared
    shard_log = (tmp_path / "second" / "logs" / "shard.log").read_text()
    assert f'"reference_dataset": "{reference}"' in shard_log
    assert len({u.split("/")[5] for u in wine_on_s3.list(f"{EXPORT_BASE}/wine/")}) == 2
    _serves_tensorboard(out, tmp_path)


def _serves_tensorboard(out, tmp_path) -> None:
    """`kfdist tensorboard s3://...` mirrors the run's event files and serves them."""
    [model] = {os.path.dirname(p) for p in glob.glob(
        str(out / "pipeline_root" / "**" / "tensorboard"), recursive=True)}
    work = f"s3://{BUCKET}/work/wine"
    storage.copy_dir_to(os.path.join(model, "tensorboard"), f"{work}/model/tensorboard")
    port = free_port()
    board = subprocess.Popen([sys.executable, "-m", "kfdist", "tensorboard", work, "--port",
                              str(port), "--refresh", "1"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        runs, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline and "model/train" not in runs:
            assert board.poll() is None, board.stdout.read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5) as r:
                    runs = json.loads(r.read())
            except OSError:
                time.sleep(1)
        assert "model/train" in runs, runs
    finally:
        board.send_signal(signal.SIGINT)
        board.wait(timeout=60)
