"""The `local` backend: the job's replicas as processes on this machine.

Each replica is `python -u -m kfdist.components.train_distributed.replica`,
given the TF_CONFIG the Training Operator would inject (ports on localhost,
picked by binding port 0; none for a single replica), legacy Keras, and the
launcher's `sys.path` as PYTHONPATH so user model modules import the same way
in the replicas as in the launcher.

Every output line of a replica goes to `log` as it arrives, prefixed with
`[worker-i] `. When a replica fails, the others are terminated and
`TrainingFailedError` names the replica, its exit code and its last lines.
Whatever happens (failure, an exception in `log`, KeyboardInterrupt), no
replica outlives `run_job`; a replica also exits if its launcher is killed.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Deque, Dict, List, Optional, Sequence

from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed import config, tf_config

REPLICA_MODULE = "kfdist.components.train_distributed.replica"
TAIL_LINES = 30
POLL_SECONDS = 0.1
TERMINATE_GRACE_SECONDS = 5.0


def free_ports(count: int) -> List[int]:
    """Returns `count` distinct free TCP ports on localhost (bound to port 0, then released)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("localhost", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def replica_pythonpath() -> str:
    """The launcher's import path as a PYTHONPATH value (the current directory made absolute)."""
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    return os.pathsep.join(dict.fromkeys(entries))


def replica_env(tf_config_value: Optional[dict]) -> Dict[str, str]:
    """The environment of one replica process."""
    env = dict(os.environ)
    env.pop(tf_config.TF_CONFIG_ENV, None)
    if tf_config_value is not None:
        env[tf_config.TF_CONFIG_ENV] = tf_config.to_env_value(tf_config_value)
    env.update({"TF_USE_LEGACY_KERAS": "1", "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": replica_pythonpath(), config.LAUNCHER_PID_ENV: str(os.getpid())})
    return env


@dataclasses.dataclass
class _Replica:
    """A started replica process and the thread streaming its output."""

    task: tf_config.Task
    process: subprocess.Popen
    tail: Deque[str]
    reader: Optional[threading.Thread] = None


class _Supervisor:
    """Starts, streams and stops the replica processes of one job."""

    def __init__(self, log: Callable[[str], None]):
        self._log = log
        self._log_lock = threading.Lock()
        self._log_error: Optional[BaseException] = None
        self.replicas: List[_Replica] = []

    def start(self, task: tf_config.Task, argv: Sequence[str], env: Dict[str, str]) -> None:
        process = subprocess.Popen(list(argv), env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, bufsize=1, errors="replace",
                                   start_new_session=True)
        replica = _Replica(task, process, collections.deque(maxlen=TAIL_LINES))
        replica.reader = threading.Thread(target=self._stream, args=(replica,),
                                          name=f"log-{task.label}", daemon=True)
        self.replicas.append(replica)
        replica.reader.start()

    def log(self, line: str) -> None:
        """Passes one line to the job's `log`, serialised with the replicas' lines."""
        with self._log_lock:
            self._log(line)

    def _stream(self, replica: _Replica) -> None:
        prefix = f"[{replica.task.label}] "
        for line in replica.process.stdout:
            line = line.rstrip("\n")
            replica.tail.append(line)
            if self._log_error is not None:
                continue  # keep draining the pipe so the replica never blocks on it
            try:
                self.log(prefix + line)
            except BaseException as e:  # noqa: B902 -- re-raised by wait()
                self._log_error = e

    def wait(self) -> None:
        """Returns when every replica exited 0; raises when one fails or `log` raised."""
        pending = list(self.replicas)
        while pending:
            if self._log_error is not None:
                raise self._log_error
            for replica in list(pending):
                code = replica.process.poll()
                if code is None:
                    continue
                pending.remove(replica)
                if code != 0:
                    self.stop_all()
                    raise TrainingFailedError(self._failure_message(replica, code))
            time.sleep(POLL_SECONDS)
        self._join_readers()

    def stop_all(self) -> None:
        """Terminates every replica still running (SIGTERM, then SIGKILL) and reaps it."""
        running = [r for r in self.replicas if r.process.poll() is None]
        for r in running:
            _signal_group(r.process, signal.SIGTERM)
        deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
        for r in running:
            try:
                r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(r.process, signal.SIGKILL)
                r.process.wait()
        self._join_readers()

    def _join_readers(self) -> None:
        for r in self.replicas:
            if r.reader is not None:
                r.reader.join(timeout=TERMINATE_GRACE_SECONDS)

    def _failure_message(self, failed: _Replica, code: int) -> str:
        reason = f"exit code {code}"
        if code < 0:
            reason += f" (killed by {signal.Signals(-code).name})"
        last = next((line for line in reversed(failed.tail) if line.strip()), "(no output)")
        lines = "\n".join(f"  {line}" for line in failed.tail) or "  (no output)"
        return (f"training failed: {failed.task.label} (pid {failed.process.pid}) ended with "
                f"{reason}: {last}\nThe other replicas were stopped. "
                f"Last lines of {failed.task.label}:\n{lines}")


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """Signals the replica's process group (it leads its own session)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_job(job: config.JobConfig, config_path: str, log: Callable[[str], None]) -> None:
    """Runs the job's replicas locally until all succeed or one fails.

    Args:
      job: The validated job; `job.job.workers` worker processes are started.
      config_path: Where `job` is written as JSON (passed to every replica).
      log: Receives every replica output line, prefixed `[worker-i] `.

    Raises:
      TrainingFailedError: If a replica exits non-zero (the others are stopped).
    """
    workers = job.job.workers
    cluster = tf_config.worker_cluster([f"localhost:{p}" for p in free_ports(workers)])
    argv = [sys.executable, "-u", "-m", REPLICA_MODULE, "--config", config_path]
    supervisor = _Supervisor(log)
    try:
        for task, value in tf_config.tf_configs(cluster):
            supervisor.start(task, argv, replica_env(value))
        supervisor.log(f"started {workers} local worker process(es): pids "
                       f"{[r.process.pid for r in supervisor.replicas]}")
        supervisor.wait()
    finally:
        supervisor.stop_all()
