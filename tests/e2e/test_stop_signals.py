"""Stopping `kfdist train` / `kfdist run` (SIGTERM, Ctrl-C, a killed launcher) leaves no process,
and a stop the command sees (SIGTERM, Ctrl-C) no temporary file either.

Every process a test starts carries an environment marker, so the descendants
still alive afterwards (re-parented to init or not) are found by it; its TMPDIR is a directory
of its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.fakes.process_state import is_running

MARKER = "KFDIST_STOP_TEST_MARKER"
STARTED = re.compile(r"started \d+ local replica process")
TRAINING = re.compile(r"\] epoch 1/")
#: SIGTERM/Ctrl-C must stop everything within 10 s; the loaded test machine gets a margin.
STOP_SECONDS = 30.0


def _marked(marker: str) -> list:
    """Pids of the live processes whose environment holds `marker`."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0") and is_running(int(name)):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class _Command:
    """`python -m kfdist ARGS` in its own session, as a terminal runs a foreground job."""

    def __init__(self, args, tmp_path):
        self.marker = uuid.uuid4().hex
        self.log_path = tmp_path / "output.log"
        self.temp_dir = tmp_path / "tmp"
        self.temp_dir.mkdir()
        env = dict(os.environ, **{MARKER: self.marker}, TMPDIR=str(self.temp_dir))
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kfdist", *args], stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, cwd=str(tmp_path), start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: re.Pattern, timeout: float = 420.0) -> None:
        deadline = time.monotonic() + timeout
        while not pattern.search(self.text()):
            assert self.proc.poll() is None, f"ended before {pattern.pattern}:\n{self.text()}"
            assert time.monotonic() < deadline, f"no {pattern.pattern} in:\n{self.text()}"
            time.sleep(0.2)

    def wait_for_process(self, program: str, timeout: float = 120.0) -> None:
        """Waits until a process this command started runs `program`."""
        deadline = time.monotonic() + timeout
        while not any(program in _cmdline(pid) for pid in _marked(self.marker)):
            assert self.proc.poll() is None, f"ended before {program} ran:\n{self.text()}"
            assert time.monotonic() < deadline, f"{program} never ran:\n{self.text()}"
            time.sleep(0.05)

    def stop(self, sig: int, group: bool) -> int:
        """Sends `sig` (to the process group, as a terminal's Ctrl-C does, or the pid) and waits."""
        (os.killpg if group else os.kill)(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOP_SECONDS:g}s after {signal.Signals(sig).name}:\n"
                        f"{self.text()}")

    def left_over(self, within: float = 10.0) -> list:
        deadline = time.monotonic() + within
        while _marked(self.marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        return _marked(self.marker)

    def close(self) -> None:
        for pid in _marked(self.marker):
            os.kill(pid, signal.SIGKILL)
        self._log.close()


@pytest.fixture
def command(tmp_path):
    started = []

    def start(*args):
        started.append(_Command(args, tmp_path))
        return started[-1]

    yield start
    for c in started:
        c.close()


TRAIN_PS = ("train", "--strategy", "parameter_server", "--workers", "2", "--ps", "1",
            "--epochs", "2", "--output", "run")


def _assert_stopped(cmd: _Command, code: int, sig: int) -> None:
    text = cmd.text()
    assert code == 128 + sig, text
    assert "Traceback" not in text, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("kfdist: stopped by " + signal.Signals(sig).name), text
    assert cmd.left_over() == [], f"processes left after {signal.Signals(sig).name}:\n{text}"
    # (Bar the machine-wide directory of local jobs' port locks, empty once no job holds one.)
    left = sorted(p.name for p in cmd.temp_dir.iterdir()
                  if p.name != "kfdist-ports" or any(p.iterdir()))
    assert left == [], f"temporary files left after {signal.Signals(sig).name}: {left[:20]}"


#: (moment, signal) pairs: each moment once and each signal once per command (the two signals
#: take the same path to the stop; the last line names the one received).
TRAIN_STOPS = [("start-up", signal.SIGTERM), ("training", signal.SIGINT)]
RUN_STOPS = [("shard", signal.SIGINT), ("evaluation", signal.SIGTERM)]


def _ids(pairs):
    return [f"{moment}-{signal.Signals(sig).name}" for moment, sig in pairs]


@pytest.mark.slow
@pytest.mark.parametrize("moment,sig", TRAIN_STOPS, ids=_ids(TRAIN_STOPS))
def test_train_stops_every_replica(command, moment, sig):
    cmd = command(*TRAIN_PS)
    cmd.wait_for(STARTED if moment == "start-up" else TRAINING)
    if moment == "start-up":
        time.sleep(1.0)  # the replicas are importing TensorFlow
    _assert_stopped(cmd, cmd.stop(sig, group=True), sig)


@pytest.mark.slow
def test_sigterm_to_the_run_process_alone_stops_its_steps_and_replicas(command):
    cmd = command("run", "mnist", "--strategy", "parameter_server", "--workers", "2", "--ps", "1",
                  "--epochs", "2", "--no-cache", "--verbose", "--output", "run")
    cmd.wait_for(STARTED)
    time.sleep(1.0)
    _assert_stopped(cmd, cmd.stop(signal.SIGTERM, group=False), signal.SIGTERM)


@pytest.mark.slow
@pytest.mark.parametrize("moment,sig", RUN_STOPS, ids=_ids(RUN_STOPS))
def test_a_signal_to_a_run_stops_each_step(command, moment, sig):
    """The shard step with its Beam worker processes, and the evaluation after training."""
    cmd = command("run", "mnist", "--strategy", "multi_worker_mirrored", "--workers", "2",
                  "--epochs", "1", "--shard-runner", "beam" if moment == "shard" else "local",
                  "--no-cache", "--verbose", "--output", "run")
    if moment == "shard":
        cmd.wait_for_process("apache_beam.runners.worker.sdk_worker_main")
    else:
        cmd.wait_for(re.compile("Executing task 'evaluate-model'"))  # the step takes ~1 s
    _assert_stopped(cmd, cmd.stop(sig, group=True), sig)


@pytest.mark.slow
def test_ctrl_c_of_a_run_ends_in_one_line_not_a_traceback(command, tmp_path):
    cmd = command("run", "mnist", "--strategy", "mirrored", "--epochs", "2", "--no-cache",
                  "--verbose", "--output", "run")
    cmd.wait_for(TRAINING)
    _assert_stopped(cmd, cmd.stop(signal.SIGINT, group=True), signal.SIGINT)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())  # the stop's record
    assert summary["status"] == "stopped" and summary["failure"]["step"] == "train"
    assert summary["steps"] == {"shard": "succeeded", "train": "stopped", "evaluate": "not run",
                                "export": "not run"}
    assert summary["failure"]["error"] == "received SIGINT: the run was terminated"


@pytest.mark.slow
def test_replicas_of_a_killed_launcher_end_while_tensorflow_holds_them(command):
    cmd = command(*TRAIN_PS)
    cmd.wait_for(STARTED)
    time.sleep(1.0)  # no Python thread can run yet: the replicas are importing TensorFlow
    assert cmd.stop(signal.SIGKILL, group=False) == -signal.SIGKILL
    assert cmd.left_over() == [], cmd.text()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["shard", "training"])
def test_steps_and_replicas_of_a_killed_run_end(command, moment):
    """SIGKILL leaves `kfdist run` no chance to stop anything: its steps stop themselves."""
    cmd = command("run", "mnist", "--strategy", "parameter_server", "--workers", "2", "--ps", "1",
                  "--epochs", "3", "--shard-runner", "beam" if moment == "shard" else "local",
                  "--no-cache", "--verbose", "--output", "run")
    if moment == "shard":
        cmd.wait_for_process("apache_beam.runners.worker.sdk_worker_main")
    else:
        cmd.wait_for(TRAINING)
    assert cmd.stop(signal.SIGKILL, group=False) == -signal.SIGKILL
    assert cmd.left_over(within=STOP_SECONDS) == [], cmd.text()


@pytest.mark.slow
def test_horovod_training_stops_mpirun_and_every_rank(command):
    cmd = command("train", "--strategy", "horovod", "--workers", "2", "--epochs", "2",
                  "--output", "run")
    cmd.wait_for(TRAINING)
    _assert_stopped(cmd, cmd.stop(signal.SIGTERM, group=True), signal.SIGTERM)


def test_sigint_cancels_once_and_an_inner_block_leaves_the_outer_in_charge():
    from kfdist.components.train_distributed.kubernetes.lifecycle import step_signals

    seen = []
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a job started in the background
    with pytest.raises(step_signals.StepCancelled) as cancelled:
        with step_signals.cancel_on_sigterm(exit_code=None, signums=(signal.SIGTERM, signal.SIGINT),
                                            on_signal=seen.append):
            with step_signals.cancel_on_sigterm():  # nested: no handler of its own, no exit
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
    assert cancelled.value.exit_code == 130 and seen == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is before  # restored as it was
