"""The test bed's processes: each started in a session of its own, its output in `DIR/logs/`, and
recorded in `DIR/processes.json` so that `stop` (another process, for `down.sh`) can end them all.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence

from kfdist.components.train_distributed.local.ports import PortReservation

RECORD = "processes.json"
STOP_GRACE_S = 10.0


class StartFailed(RuntimeError):
    """A process of the test bed exited or never became ready; the message quotes its log."""


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000
_held: List[PortReservation] = []  # this process's ports, locked until it exits


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds the exclusive lock of `path` (a file `<path>.lock` beside it), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"{path.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, kept for this process until it exits.

    A server of the bed may bind its port a minute after the port was picked (the operators start
    after the API server). So the port is picked below the kernel's ephemeral range, where no
    outgoing connection is given it meanwhile, and locked as kfdist locks a local job's ports
    (`PortReservation`), so that a bed another pytest worker starts at once never picks it too.
    """
    reservation = PortReservation(1, candidates=_unassigned_ports)
    if not _held:
        atexit.register(lambda: [held.release() for held in _held])  # no lock file is left
    _held.append(reservation)
    return reservation.ports[0]


def _unassigned_ports(count: int) -> List[int]:
    """`count` distinct ports below the ephemeral range that nothing is bound to now."""
    highest = int(EPHEMERAL_RANGE.read_text().split()[0]) - 1
    ports: List[int] = []
    while len(ports) < count:
        port = random.randint(LOWEST_PORT, highest)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file, or a note that it is empty."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return "(no log)"
    return "\n".join(text) or "(empty log)"


class Processes:
    """Starts and records the processes of one test bed directory."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started: Dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
              cwd: Optional[Path] = None,
              second_sigterm_after_s: Optional[float] = None,
              stop_signal: int = signal.SIGTERM) -> subprocess.Popen:
        """Starts `argv` as NAME, its output appended to `logs/NAME.log`, and records it.

        Args:
          second_sigterm_after_s: For a controller whose graceful shutdown is known to hang:
            `stop_all` sends a second SIGTERM after these seconds (controller-runtime's signal
            handler exits at once on a second signal).
          stop_signal: What `stop_all` stops it with: SIGKILL only for a program known to
            ignore SIGTERM (as a kubelet ends it after the pod's grace period).
        """
        log_path = self.logs / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       env=dict(env) if env is not None else None,
                                       cwd=str(cwd) if cwd else None)
        self.started[name] = process
        record = _read_record(self.root)
        record.append({"name": name, "pid": process.pid, "start_time": start_time(process.pid),
                       "second_sigterm_after_s": second_sigterm_after_s,
                       "stop_signal": int(stop_signal)})
        (self.root / RECORD).write_text(json.dumps(record, indent=1))
        return process

    def wait_until(self, name: str, ready: Callable[[], bool], seconds: float) -> None:
        """Waits until `ready()` holds, failing with NAME's log if it exits or `seconds` pass."""
        process = self.started[name]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise StartFailed(f"{name} exited with status {process.returncode}:\n"
                                  f"{log_tail(self.logs / f'{name}.log')}")
            try:
                if ready():
                    return
            except Exception:  # not answering yet
                pass
            time.sleep(0.1)
        raise StartFailed(f"{name} was not ready within {seconds:.0f} s:\n"
                          f"{log_tail(self.logs / f'{name}.log')}")


def _read_record(root: Path) -> List[dict]:
    try:
        return json.loads((Path(root) / RECORD).read_text())
    except (OSError, ValueError):
        return []


def start_time(pid: int) -> Optional[int]:
    """When process `pid` started (clock ticks since boot, `/proc/PID/stat`), or None if it is
    gone: with the pid, what tells the process apart from a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _ours(entry: dict) -> bool:
    """Whether the recorded process still runs, and is the one recorded (not a reused pid)."""
    return _alive(entry["pid"]) and start_time(entry["pid"]) == entry.get("start_time")


def _reused(entry: dict) -> bool:
    """Whether another process now has the recorded pid. (A process group outlives its leader
    only while a member runs, and Linux never hands out a pid that names a live group: a
    recorded group whose leader is gone is still the bed's to signal.)"""
    return _alive(entry["pid"]) and start_time(entry["pid"]) != entry.get("start_time")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as ended
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_all(root: Path, keep: Sequence[str] = ()) -> List[str]:
    """Ends every recorded process group, newest first (clients before the servers they use):
    SIGTERM (twice for a process recorded so), then SIGKILL after `STOP_GRACE_S`.

    Args:
      root: The bed's directory.
      keep: Names of processes left running (and recorded), to be stopped by a later call.

    Returns:
      The names of processes that had to be killed.
    """
    killed = []
    kept = [entry for entry in _read_record(root) if entry["name"] in keep]
    for entry in reversed(_read_record(root)):
        if entry["name"] in keep or _reused(entry):
            continue
        pid = entry["pid"]
        try:
            os.killpg(pid, entry.get("stop_signal", signal.SIGTERM))
        except (ProcessLookupError, PermissionError):
            pass
        started = time.monotonic()
        second = entry.get("second_sigterm_after_s")
        while time.monotonic() < started + STOP_GRACE_S and _alive(pid):
            if second is not None and time.monotonic() >= started + second:
                second = None
                try:
                    os.killpg(pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
            _reap(pid)
            time.sleep(0.05)
        if _alive(pid):
            killed.append(entry["name"])
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _reap(pid)
    if kept:
        (Path(root) / RECORD).write_text(json.dumps(kept, indent=1))
    else:
        (Path(root) / RECORD).unlink(missing_ok=True)
    return killed


def _reap(pid: int) -> None:
    """Collects the exit of a child of this process (others are not ours to reap)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def pids_whose_argv(matches: Callable[[List[bytes]], bool]) -> List[int]:
    """The pids of this machine's processes whose command line (`/proc/PID/cmdline`, split into
    its words) `matches` accepts."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and matches(argv):
            found.append(int(entry))
    return found


def running(root: Path) -> List[str]:
    """Names of recorded processes still alive."""
    return [e["name"] for e in _read_record(root) if _ours(e)]


def https_ok(url: str, ca: Path, cert: Optional[Path] = None, key: Optional[Path] = None) -> bool:
    """Whether a GET of `url` answers 200 over TLS verified with `ca` (and a client certificate)."""
    context = ssl.create_default_context(cafile=str(ca))
    if cert:
        context.load_cert_chain(str(cert), str(key))
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def http_ok(url: str) -> bool:
    """Whether a plain HTTP GET of `url` answers 200 (within 2 s)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on `host`:`port`."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
