"""A real Google Cloud Storage API for tests: gcp-storage-emulator in a subprocess.

The emulator runs in memory on a free localhost port for the whole test
session; each test that asks for the `gcs_emulator` fixture gets
`STORAGE_EMULATOR_HOST` pointed at it (so `kfdist.components.common.storage`
and any subprocess the test starts talk to the emulator) and a helper to make
buckets and move files (tests/conftest.py registers the fixture):

    def test_something(gcs_emulator):
        gcs_emulator.create_bucket("data")
        gcs_emulator.upload_dir(local_dir, "gs://data/input")
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import IO, List, Optional, Tuple

import pytest

from cluster.processes import free_port

PROJECT = "kfdist"
STARTUP_TIMEOUT_S = 30.0


def wait_until_serving(proc: subprocess.Popen, endpoint: str, log: IO[str]) -> None:
    """Waits until the emulator started as `proc` answers on `endpoint`; fails with its log."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"gcp-storage-emulator exited with {proc.returncode}: "
                               f"{log.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{endpoint}/storage/v1/b?project={PROJECT}", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"gcp-storage-emulator did not answer at {endpoint} "
                       f"within {STARTUP_TIMEOUT_S:.0f}s")


@dataclasses.dataclass(frozen=True)
class GcsEmulator:
    """A running emulator and helpers that use it.

    Attributes:
      endpoint: `http://127.0.0.1:PORT`, the value of `STORAGE_EMULATOR_HOST`.
    """

    endpoint: str

    def client(self):
        """A google-cloud-storage client of the emulator (anonymous credentials)."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.endpoint})

    def create_bucket(self, name: str):
        """Creates bucket `name` (returns it)."""
        return self.client().create_bucket(name)

    def upload_dir(self, local_dir: str, uri: str) -> List[str]:
        """Uploads every file below `local_dir` to the `gs://bucket/prefix` `uri`.

        Returns:
          The uploaded objects' `gs://` URIs, sorted.
        """
        bucket_name, _, prefix = uri[len("gs://"):].partition("/")
        bucket = self.client().bucket(bucket_name)
        uploaded = []
        for root, _, files in os.walk(local_dir):
            for name in files:
                rel = os.path.relpath(os.path.join(root, name), local_dir).replace(os.sep, "/")
                key = f"{prefix.rstrip('/')}/{rel}" if prefix else rel
                bucket.blob(key).upload_from_filename(os.path.join(root, name))
                uploaded.append(f"gs://{bucket_name}/{key}")
        return sorted(uploaded)

    def list(self, uri: str) -> List[str]:
        """The `gs://` URIs of every object under the prefix `uri`, sorted."""
        bucket_name, _, prefix = uri[len("gs://"):].partition("/")
        blobs = self.client().list_blobs(bucket_name, prefix=prefix)
        return sorted(f"gs://{bucket_name}/{b.name}" for b in blobs)

    def download_dir(self, uri: str, local_dir: str) -> str:
        """Downloads every object under the prefix `uri` below `local_dir` (returned)."""
        bucket_name, _, prefix = uri[len("gs://"):].partition("/")
        base = prefix.rstrip("/") + "/" if prefix else ""
        for blob in self.client().list_blobs(bucket_name, prefix=base):
            path = os.path.join(local_dir, *blob.name[len(base):].split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            blob.download_to_filename(path)
        return local_dir


class _EmulatorProcess:
    """The emulator subprocess, started on first use and stopped at session end."""

    endpoint: Optional[str] = None

    @classmethod
    def ensure_started(cls, config: pytest.Config) -> str:
        if cls.endpoint is None:
            port = free_port()
            endpoint = f"http://127.0.0.1:{port}"
            proc, log = start_server("127.0.0.1", port)
            config.add_cleanup(lambda: cls._stop(proc, log))
            wait_until_serving(proc, endpoint, log)
            cls.endpoint = endpoint
        return cls.endpoint

    @classmethod
    def _stop(cls, proc: subprocess.Popen, log: IO[str]) -> None:
        cls.endpoint = None
        stop_server(proc, log)


def start_server(host: str, port: int) -> Tuple[subprocess.Popen, IO[str]]:
    """Starts an in-memory emulator on `host:port`; its process and its log (a file, not a pipe:
    the emulator never blocks on it)."""
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "gcs_emulator_server.py"), "start", f"--host={host}",
         f"--port={port}", "--in-memory"], stdout=log, stderr=subprocess.STDOUT, text=True)
    return proc, log


def stop_server(proc: subprocess.Popen, log: IO[str]) -> None:
    """Ends an emulator process (SIGTERM, SIGKILL after 10 s) and closes its log."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture
def gcs_emulator(request, monkeypatch) -> GcsEmulator:
    """An in-memory GCS emulator (one per session), with `STORAGE_EMULATOR_HOST` set for this
    test."""
    endpoint = _EmulatorProcess.ensure_started(request.config)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    return GcsEmulator(endpoint=endpoint)
