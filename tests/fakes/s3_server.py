"""A real S3 server for tests: MinIO (the object store of Kubeflow Pipelines' default install) in a
subprocess.

MinIO's server binary is the one the cluster test bed builds and caches (`tests/cluster/build.sh
minio`). It runs on a free localhost port, over a temporary directory, for the whole test
session; each test that asks for the `s3_server` fixture gets the `AWS_*` variables pointed at
it (so `kfdist.components.common.storage` and any subprocess the test starts use it) and a
helper to make buckets and objects (tests/conftest.py registers the fixture):

    def test_something(s3_server):
        s3_server.create_bucket("data")
        s3_server.put("s3://data/input/a.csv", "x,y\\n1,2\\n")
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import time
import urllib.request
from typing import IO, Dict, List, Optional

import pytest

from cluster.processes import free_port
from fakes.gcs_emulator import stop_server

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_SCRIPT = os.path.join(REPO, "tests", "cluster", "build.sh")
ACCESS_KEY = "kfdist-test"
SECRET_KEY = "kfdist-test-secret"
REGION = "us-east-1"
STARTUP_TIMEOUT_S = 60.0


def minio_binary() -> str:
    """The path of MinIO's server binary, built and cached by the cluster bed's build script."""
    built = subprocess.run(["bash", BUILD_SCRIPT, "minio"], capture_output=True, text=True,
                           check=True, timeout=1800).stdout.split()
    return built[built.index("minio") + 1]


def wait_until_ready(proc: subprocess.Popen, endpoint: str, log: IO[str]) -> None:
    """Waits until MinIO started as `proc` answers `/minio/health/ready`; fails with its log."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"minio exited with {proc.returncode}: {log.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{endpoint}/minio/health/ready", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"minio did not answer at {endpoint} within {STARTUP_TIMEOUT_S:.0f}s")


def client_environment(endpoint: str) -> Dict[str, str]:
    """The `AWS_*` variables of a client of the server at `endpoint`."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}


@dataclasses.dataclass(frozen=True)
class S3Server:
    """A running MinIO and helpers that use it.

    Attributes:
      endpoint: `http://127.0.0.1:PORT`, the value of `AWS_ENDPOINT_URL`.
    """

    endpoint: str

    def client(self):
        """A boto3 S3 client of the server, with its root credentials."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def create_bucket(self, name: str) -> None:
        """Creates bucket `name`."""
        self.client().create_bucket(Bucket=name)

    def put(self, uri: str, text: str) -> None:
        """Writes `text` to the object `uri` (`s3://` or `minio://`)."""
        bucket, _, key = uri.partition("://")[2].partition("/")
        self.client().put_object(Bucket=bucket, Key=key, Body=text.encode())

    def get(self, uri: str) -> str:
        """The text of the object `uri`."""
        bucket, _, key = uri.partition("://")[2].partition("/")
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read().decode()

    def list(self, uri: str) -> List[str]:
        """The URIs (with `uri`'s scheme) of every object whose name starts with `uri`'s key."""
        scheme, _, path = uri.partition("://")
        bucket, _, prefix = path.partition("/")
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                        Prefix=prefix)
        return sorted(f"{scheme}://{bucket}/{o['Key']}" for p in pages
                      for o in p.get("Contents", ()))


class _ServerProcess:
    """The MinIO subprocess, started on first use and stopped (its data removed) at session end."""

    endpoint: Optional[str] = None

    @classmethod
    def ensure_started(cls, config: pytest.Config) -> str:
        if cls.endpoint is None:
            binary, port = minio_binary(), free_port()
            data = tempfile.TemporaryDirectory(prefix="kfdist-minio-")
            log = tempfile.TemporaryFile("w+")
            env = {**os.environ, "MINIO_ROOT_USER": ACCESS_KEY, "MINIO_ROOT_PASSWORD": SECRET_KEY,
                   "MINIO_BROWSER": "off"}
            proc = subprocess.Popen([binary, "server", data.name, "--address", f"127.0.0.1:{port}",
                                     "--quiet"], stdout=log, stderr=subprocess.STDOUT, env=env)
            config.add_cleanup(lambda: cls._stop(proc, log, data))
            endpoint = f"http://127.0.0.1:{port}"
            wait_until_ready(proc, endpoint, log)
            cls.endpoint = endpoint
        return cls.endpoint

    @classmethod
    def _stop(cls, proc: subprocess.Popen, log: IO[str],
              data: tempfile.TemporaryDirectory) -> None:
        cls.endpoint = None
        stop_server(proc, log)
        data.cleanup()


@pytest.fixture
def s3_server(request, monkeypatch) -> S3Server:
    """A MinIO server (one per session), with the `AWS_*` variables set for this test (and no
    other AWS configuration: no profile, no shared files)."""
    endpoint = _ServerProcess.ensure_started(request.config)
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(name, os.devnull)
    for name, value in client_environment(endpoint).items():
        monkeypatch.setenv(name, value)
    return S3Server(endpoint=endpoint)
