"""`--runner docker` against an engine that removes containers as Podman 4 does.

A Docker API over HTTP (tests/fakes/docker_engine.py) plays Podman: an auto-removed container
is being removed when docker-py inspects it a second time, and the answer is a 500. Behind
kfdist's relay the container is not auto-removed but removed once its exit status is read, and
the 500 is Docker's 404; an engine kfdist does not relay (DOCKER_HOST) that fails a call ends
the run with kfdist's own error naming the step, not a traceback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import docker
import pytest

import kfdist
from kfdist.docker_api_relay import DockerApiRelay

from fakes.docker_engine import CONTAINER_ID, LOST, FakeDockerEngine


@pytest.fixture
def engine_behind_relay(tmp_path):
    engine_socket = str(tmp_path / "engine.sock")
    with FakeDockerEngine(images=[kfdist.RUNTIME_IMAGE], unix_socket=engine_socket) as engine:
        relay = DockerApiRelay(engine_socket, str(tmp_path / "relay.sock"))
        client = docker.DockerClient(base_url=relay.url, version="1.41")
        try:
            yield engine, client
        finally:
            client.close()
            relay.close()
    assert not (tmp_path / "relay.sock").exists()


def test_an_auto_removed_step_container_is_removed_once_its_status_is_read(engine_behind_relay):
    engine, client = engine_behind_relay
    # What kfp.local does for a step: run detached with auto-removal, follow the log, wait.
    container = client.containers.run(kfdist.RUNTIME_IMAGE, ["true"], detach=True,
                                      auto_remove=True, labels={"kfdist.run": "r1"})
    assert list(container.logs(stream=True)) == []
    assert engine.created["HostConfig"]["AutoRemove"] is False
    assert engine.created["Labels"] == {"kfdist.run": "r1"}  # the rest passes unchanged
    assert not engine.removed
    assert container.wait()["StatusCode"] == 0
    assert engine.removed
    assert engine.requests[-1] == ("DELETE", f"/containers/{CONTAINER_ID}", "force=true&v=true")


def test_a_container_the_engine_is_removing_is_docker_s_404(engine_behind_relay, tmp_path):
    engine, client = engine_behind_relay
    client.containers.create(kfdist.RUNTIME_IMAGE, ["true"])
    engine.lose_next_inspection = True
    with pytest.raises(docker.errors.NotFound, match="no such container"):
        client.api.inspect_container(CONTAINER_ID)
    # Straight to the engine, the same inspection is the 500 that failed the runs.
    direct = docker.DockerClient(base_url=engine.url, version="1.41")
    engine.lose_next_inspection = True
    with pytest.raises(docker.errors.APIError) as raised:
        direct.api.inspect_container(CONTAINER_ID)
    direct.close()
    assert raised.value.status_code == 500 and LOST in str(raised.value)


def test_an_engine_failure_ends_the_run_with_kfdists_error(tmp_path):
    with FakeDockerEngine(images=[kfdist.RUNTIME_IMAGE]) as engine:
        env = dict(os.environ, DOCKER_HOST=engine.url)
        result = subprocess.run(
            [sys.executable, "-m", "kfdist", "run", "mnist", "--runner", "docker", "--output",
             str(tmp_path / "run")], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert "failed in shard: the container engine failed the step's container" in message
    assert LOST in message
    assert f"its whole log: {tmp_path / 'run' / 'logs' / 'shard.log'}" in message
    # kfp.local asked for auto-removal (DOCKER_HOST is used as it is, without the relay), and
    # the run looked for containers left behind.
    assert engine.created["HostConfig"]["AutoRemove"] is True
    assert engine.created["Cmd"][:2] == ["sh", "-ec"]
    assert ("GET", "/containers/json") in [r[:2] for r in engine.requests]


def test_a_chunked_upload_is_refused_with_a_reason(engine_behind_relay, tmp_path):
    engine, _ = engine_behind_relay
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(tmp_path / "relay.sock"))
        sock.sendall(b"POST /v1.41/build HTTP/1.1\r\nHost: docker\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 501 "), answer[:200]
    assert b"Content-Length only" in answer
    assert not [r for r in engine.requests if r[1] == "/build"]
