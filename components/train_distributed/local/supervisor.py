"""Supervises a local job's replica processes under the operators' restart and success rules.

Every output line of a replica goes to `log` as it arrives, prefixed with
`[worker-i] ` (a per-replica value an error prints whole on one line:
`value_folding`). A replica that exits non-zero is restarted or fails the
job per the restart policy (`job.exit_codes`) and backoff limit; when the job
fails, the others are terminated and `TrainingFailedError` names the
replica, its exit code and its last lines.

Nothing outlives the supervisor: `run` stops every replica's process group
before it returns or raises, SIGTERM and SIGINT included (on the main
thread), and every replica is started with a parent-death signal, so the
kernel ends it should the supervisor's process be killed outright, even
while TensorFlow holds the replica's GIL.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import subprocess
import threading
import time
from typing import Callable, Deque, Dict, List, Optional, Sequence

from kfdist.components.common import parent_death, value_folding
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.job import config, exit_codes, strategy_rules, tf_config
from kfdist.components.train_distributed.kubernetes.lifecycle import step_signals
from kfdist.components.train_distributed.local import mpi_output

LAUNCHER = "launcher"
#: A PyTorchJob's leader: the job succeeds when it does.
MASTER = "master"
TAIL_LINES = 30
POLL_SECONDS = 0.1
TERMINATE_GRACE_SECONDS = 5.0
#: The signals that stop a supervised job: a terminated run's SIGTERM, a person's Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclasses.dataclass
class _Replica:
    """A replica of the job: its program, its current process and output."""

    task: tf_config.Task
    argv: Sequence[str]
    env: Dict[str, str]
    tail: Deque[str]
    process: Optional[subprocess.Popen] = None
    reader: Optional[threading.Thread] = None
    succeeded: bool = False


@dataclasses.dataclass(frozen=True)
class LocalJobResult:
    """How a local job went.

    Attributes:
      restarts: Replica restarts made under the restart policy.
      ended: Replicas still running when the job succeeded, ended then (PS, evaluator, ...).
    """

    restarts: int
    ended: List[str]


class Supervisor:
    """Starts, streams, restarts and stops the replica processes of one job."""

    def __init__(self, log: Callable[[str], None], spec: config.JobSpec, strategy: str):
        self._log = log
        self._log_lock = threading.Lock()
        self._log_error: Optional[BaseException] = None
        self._spec = spec
        self._strategy = strategy
        self.replicas: List[_Replica] = []
        self.restarts = 0

    def add(self, task: tf_config.Task, argv: Sequence[str], env: Dict[str, str]) -> None:
        self.replicas.append(_Replica(task, list(argv), env, collections.deque(maxlen=TAIL_LINES)))

    def _start(self, replica: _Replica) -> None:
        # mpirun stops its ranks on SIGTERM; a replica has nothing to clean up.
        death_signal = signal.SIGTERM if replica.task.type == LAUNCHER else signal.SIGKILL
        # Its own process group (signalled whole, out of reach of the terminal's Ctrl-C) in
        # this process's session: Linux's autogroup scheduler shares the CPU per session, and a
        # session per replica gave every replica an equal share whatever its work, which slowed
        # a parameter_server job (chief, parameter server, workers) by several per cent.
        replica.process = subprocess.Popen(
            parent_death.with_parent_death_signal(replica.argv, death_signal,
                                                  exit_codes.LAUNCHER_GONE), env=replica.env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            bufsize=1, errors="replace", process_group=0)
        replica.reader = threading.Thread(target=self._stream, args=(replica, replica.process),
                                          name=f"log-{replica.task.label}", daemon=True)
        replica.reader.start()

    def run(self) -> LocalJobResult:
        """Starts every replica and waits for the job; no replica is left running after.

        SIGTERM and SIGINT (Ctrl-C) stop every replica first. Where a caller
        already turned them into `StepCancelled` (`step_signals`), that is
        raised; otherwise, on the main thread, the process then exits with
        143 or 130 (as it would have without the replicas), after a log line.

        Returns:
          The restarts made and the replicas ended at the end.

        Raises:
          TrainingFailedError: If the job failed.
          StepCancelled: If the process was asked to stop inside a caller's block.
        """
        if step_signals.active() or threading.current_thread() is not threading.main_thread():
            return self._run()
        try:
            with step_signals.cancel_on_sigterm(exit_code=None, signums=STOP_SIGNALS):
                return self._run()
        except step_signals.StepCancelled as stopped:
            try:
                self.log(f"{stopped}; every replica was stopped")
            except OSError:  # the output went with whoever stopped this process
                pass
            raise SystemExit(stopped.exit_code) from None

    def _run(self) -> LocalJobResult:
        try:
            self.start_all()
            return self.wait()
        finally:
            with step_signals.shielded():
                self.stop_all()

    def start_all(self) -> None:
        for replica in self.replicas:
            self._start(replica)
        self.log(f"started {len(self.replicas)} local replica process(es): " + ", ".join(
            f"{r.task.label} pid {r.process.pid}" for r in self.replicas))

    def log(self, line: str) -> None:
        """Passes one line to the job's `log`, serialised with the replicas' lines."""
        with self._log_lock:
            self._log(line)

    def _stream(self, replica: _Replica, process: subprocess.Popen) -> None:
        prefix = f"[{replica.task.label}] "
        lines = (mpi_output.rank_lines(process.stdout) if replica.task.type == LAUNCHER
                 else ((None, raw.rstrip("\n")) for raw in process.stdout))
        for rank, line in value_folding.folded(lines):  # a per-replica value: one line
            rank_label = f"[rank-{rank}] " if rank is not None else ""
            replica.tail.append(rank_label + line)
            if self._log_error is not None:
                continue  # keep draining the pipe so the replica never blocks on it
            try:
                self.log((rank_label or prefix) + line)
            except BaseException as e:  # noqa: B902 -- re-raised by wait()
                self._log_error = e

    def _decides_success(self) -> List[_Replica]:
        """The replicas whose success is the job's, as the operators decide it."""
        by_type = lambda t: [r for r in self.replicas if r.task.type == t]  # noqa: E731
        if self._strategy == strategy_rules.HOROVOD:
            return by_type(LAUNCHER)
        for leader in (tf_config.CHIEF, MASTER):
            if by_type(leader):
                return by_type(leader)
        workers = by_type(tf_config.WORKER)
        if self._spec.effective_success_policy(self._strategy) == "AllWorkers":
            return workers
        return workers[:1]

    def wait(self) -> LocalJobResult:
        """Returns when the job succeeded; raises when it failed or `log` raised."""
        deciders = self._decides_success()
        deadline = self._spec.active_deadline_seconds
        started = time.monotonic()
        while not all(r.succeeded for r in deciders):
            if self._log_error is not None:
                raise self._log_error
            if deadline is not None and time.monotonic() - started > deadline:
                raise TrainingFailedError(
                    f"training failed: DeadlineExceeded: the job ran longer than "
                    f"active_deadline_seconds={deadline:g}; its replicas were stopped")
            for replica in self.replicas:
                code = replica.process.poll()
                if code is None or replica.succeeded:
                    continue
                if code == 0:
                    replica.succeeded = True
                    continue
                self._on_failure(replica, exit_codes.container_exit_code(code), code)
            time.sleep(POLL_SECONDS)
        ended = [r.task.label for r in self.replicas if r.process.poll() is None]
        if ended:
            self.log(f"job succeeded; ending the replicas still running: {', '.join(ended)}")
        return LocalJobResult(restarts=self.restarts, ended=ended)

    def _on_failure(self, replica: _Replica, code: int, returncode: int) -> None:
        policy = self._spec.restart_policy
        limit = self._spec.backoff_limit
        why = None
        if not exit_codes.should_restart(policy, code):
            why = f"restartPolicy {policy} does not restart exit code {code}"
        elif limit is not None and self.restarts >= limit:
            why = (f"backoff limit reached: {self.restarts} restart(s) of backoff_limit={limit} "
                   "already made")
        if why is not None:
            self.stop_all()  # the others first; also completes the failed replica's tail
            raise TrainingFailedError(self._failure_message(replica, returncode, why))
        self.restarts += 1
        if replica.reader is not None:
            replica.reader.join(timeout=TERMINATE_GRACE_SECONDS)
        self.log(f"{replica.task.label} exited with code {code}; restarting it "
                 f"(restartPolicy {policy}, restart {self.restarts}"
                 f"{'' if limit is None else f' of at most {limit}'})")
        self._start(replica)

    def stop_all(self) -> None:
        """Terminates every replica still running (SIGTERM, then SIGKILL) and reaps it."""
        running = [r for r in self.replicas if r.process is not None and r.process.poll() is None]
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

    def _failure_message(self, failed: _Replica, returncode: int, why: str) -> str:
        reason = f"exit code {exit_codes.container_exit_code(returncode)}"
        if returncode < 0:
            reason += f" (killed by {signal.Signals(-returncode).name})"
        last = next((line for line in reversed(failed.tail) if line.strip()), "(no output)")
        lines = "\n".join(f"  {line}" for line in failed.tail) or "  (no output)"
        return (f"training failed: {failed.task.label} (pid {failed.process.pid}) ended with "
                f"{reason}: {last}\n{why}; the other replicas were stopped. "
                f"Last lines of {failed.task.label}:\n{lines}")


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """Signals the replica's process group (it leads its own)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

