"""The image's Beam SDK serves Beam's worker pool: `--shard-runner beam` with its workers in it.

A remote Beam runner (Flink, Spark, a portable job server) hands the pipeline's work to SDK
workers that a worker pool starts beside it (`environment_type=EXTERNAL`), as the Flink example's
sidecar does (`manifests/examples/beam-flink/`). Here the pool runs in a container of the runtime
image, whose Python environment is the Beam worker image's (that image adds only Beam's boot
program, which execs this same pool; it comes from Beam's SDK image on Docker Hub, so the release
workflow builds it). The shard step submits through Beam's PortableRunner; the workers unpickle
kfdist's functions from the image's kfdist and read and write `gs://` (the GCS emulator); the
dataset must equal, shard for shard, the one Beam's local runner writes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid

from kfdist.components.shard_dataset import runtime

from cluster.processes import free_port
from unit.test_beam_remote import SHARDS, assert_same_dataset, beam_locally, gs, mnist  # noqa: F401

POOL_SECONDS = 60


def _start_pool(podman: str, image: str, port: int, name: str) -> None:
    subprocess.run(
        [podman, "run", "--detach", "--name", name, "--network", "host",
         "--env", f"STORAGE_EMULATOR_HOST={os.environ['STORAGE_EMULATOR_HOST']}",
         "--env", f"GOOGLE_CLOUD_PROJECT={os.environ['GOOGLE_CLOUD_PROJECT']}",
         image, "python", "-m", "apache_beam.runners.worker.worker_pool_main",
         f"--service_port={port}"], check=True, capture_output=True, timeout=120)
    deadline = time.monotonic() + POOL_SECONDS
    while True:  # serving once its port accepts connections
        try:
            with socket.create_connection(("localhost", port), timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, _logs(podman, name)
            time.sleep(0.5)


def _logs(podman: str, name: str) -> str:
    result = subprocess.run([podman, "logs", name], capture_output=True, text=True, timeout=60)
    return result.stdout + result.stderr


def test_shards_built_by_workers_of_the_images_worker_pool(kfdist_images, podman, gcs_emulator,
                                                           gs, mnist, tmp_path):
    reference = beam_locally(mnist, tmp_path, **SHARDS)
    port, name = free_port(), f"kfdist-test-pool-{uuid.uuid4().hex[:8]}"
    try:
        _start_pool(podman, kfdist_images["runtime"], port, name)
        lines = []
        output = gs("gs://out/datasets/mnist")
        meta = runtime.shard(gs("gs://data/mnist"), output, runner="beam", log=lines.append,
                             beam_options=("runner=PortableRunner", "job_endpoint=embed",
                                           "environment_type=EXTERNAL",
                                           f"environment_config=localhost:{port}"), **SHARDS)
        pool_log = _logs(podman, name)
    finally:
        subprocess.run([podman, "rm", "--force", "--time", "5", name], capture_output=True,
                       timeout=120)
    assert_same_dataset(meta, reference, gcs_emulator.download_dir(output, str(tmp_path / "c")))
    # The work ran in the container: its pool started SDK workers for the job.
    assert "Starting worker with command" in pool_log, pool_log
