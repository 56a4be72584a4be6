"""How `--runner docker` starts each step's container, and what a failing engine leaves the user.

The entry point is run here with the shell the image has; the engine failure is played by a
Docker API over HTTP that loses the container as Podman 4 does (tests/fakes/docker_engine.py):
the run must end with kfdist's own error naming the step, not a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys

import kfdist
from kfdist.docker_run import STEP_ENTRYPOINT

from fakes.docker_engine import LOST, FakeDockerEngine


def test_the_entry_point_talks_first_then_runs_the_command_unchanged():
    command = ["sh", "-ec", 'printf "%s|%s|%s\\n" "$0" "$1" "$2"; exit 3', "arg0", "two words",
               ""]
    result = subprocess.run(STEP_ENTRYPOINT + command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 3
    assert result.stderr == f"kfdist: step container started as uid {os.getuid()}\n"
    assert result.stdout == "arg0|two words|\n"


def test_a_container_the_engine_loses_fails_the_run_with_kfdists_error(tmp_path):
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
    # The step's container was created with the entry point before kfp's command, and the run
    # looked for containers left behind.
    assert engine.created["Entrypoint"] == STEP_ENTRYPOINT
    assert engine.created["Cmd"][:2] == ["sh", "-ec"]
    assert ("GET", "/containers/json") in engine.requests
