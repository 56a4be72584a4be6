"""Stopping a `kfdist` command (SIGTERM, Ctrl-C): nothing it started is left running.

Inside `stop_on_signals` the command is its descendants' subreaper: a process
it started stays its descendant when the process in between ends (kfp.local
runs each step under `sh`, a step's replicas outlive a step killed outright),
instead of being re-parented to init and lost from view. On the first SIGTERM
or SIGINT it notes every descendant (kfp.local's step processes, their Beam
workers, training replicas, `mpirun` and its ranks), sends them SIGTERM (a
step then stops its replicas itself, see the local supervisor) and raises
`StepCancelled` in the main thread. `end_descendants` waits for them, reaps
them and kills what is left. Nothing already written is removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal
import subprocess
import threading
import time
from typing import Dict, Iterator, List, Optional, Tuple

from kfdist.components.train_distributed.kubernetes.lifecycle import step_signals

#: How long the children get to stop (the supervisor's own SIGTERM-to-SIGKILL grace is 5 s).
STOP_GRACE_SECONDS = 8.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: How long a process this command started and ends itself gets between SIGTERM and SIGKILL.
END_GRACE_SECONDS = 10.0
#: `PR_SET_CHILD_SUBREAPER` from <linux/prctl.h>.
PR_SET_CHILD_SUBREAPER = 36

#: A process as (pid, start time in clock ticks since boot): a reused pid is another process.
Process = Tuple[int, int]


def _stat(pid: int) -> Optional[Tuple[int, int, str]]:
    """(parent pid, start time, state) of `pid` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[19]), fields[0]


def descendants(root: int) -> List[Process]:
    """Every live process below `root` in the process tree."""
    children: Dict[int, List[Process]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[2] != "Z":
                children.setdefault(stat[0], []).append((int(name), stat[1]))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _alive(process: Process) -> bool:
    stat = _stat(process[0])
    return stat is not None and stat[1] == process[1] and stat[2] != "Z"


@dataclasses.dataclass
class Stop:
    """The processes this command had started when it was asked to stop."""

    processes: List[Process] = dataclasses.field(default_factory=list)

    def on_signal(self, signum: int) -> None:
        """Notes the descendants and passes SIGTERM on to them."""
        del signum
        self.processes = descendants(os.getpid())
        for pid, _ in self.processes:
            _kill(pid, signal.SIGTERM)

    def end_descendants(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Waits up to `grace` seconds for every noted (and newer) descendant, then kills them."""
        known = set(self.processes) | set(descendants(os.getpid()))
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            _reap()
            known |= set(descendants(os.getpid()))
            if not any(_alive(p) for p in known):
                break
            time.sleep(0.1)
        for process in known:
            if _alive(process):
                _kill(process[0], signal.SIGKILL)
        _reap()


def _reap() -> None:
    """Collects the exit status of every ended child (re-parented ones included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_process(process: subprocess.Popen, grace: float = END_GRACE_SECONDS) -> None:
    """Ends `process` if it still runs (SIGTERM, then SIGKILL after `grace` seconds) and reaps
    it."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """The block in which SIGTERM and SIGINT stop every descendant, then raise `StepCancelled`.

    Off the main thread (where Python cannot handle signals) it changes nothing.

    Yields:
      Nothing; run the command inside.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = Stop()
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        with step_signals.cancel_on_sigterm(exit_code=None, signums=STOP_SIGNALS,
                                            on_signal=stop.on_signal):
            yield
    except step_signals.StepCancelled:
        stop.end_descendants()
        raise
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0)
