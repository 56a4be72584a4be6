"""Free TCP ports on localhost for a local job's TF_CONFIG, reserved across concurrent jobs."""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from typing import Callable, List, Optional


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


#: Names the port lock directory for a process whose TMPDIR is not the machine's (`kfdist run`'s
#: steps have a TMPDIR of the run's own).
LOCK_DIR_ENV = "KFDIST_PORT_LOCK_DIR"


def port_lock_dir() -> str:
    """Machine-wide directory of the port locks local jobs hold while they run."""
    return os.environ.get(LOCK_DIR_ENV) or os.path.join(tempfile.gettempdir(), "kfdist-ports")


class PortReservation:
    """Localhost ports for one job's replicas, held until `release()`.

    The replicas' TensorFlow servers must bind the ports themselves (they
    refuse shared ports), so a port cannot stay bound for them; instead each
    port is locked (`flock` on `<port_lock_dir>/<port>.lock`) for as long as
    the job runs, and every local job skips ports another job has locked. Two
    jobs started at once on one machine therefore never share a port. A lock
    file is removed on release; a lock taken on a file that was removed (or
    replaced) meanwhile does not count, so removal never lets two jobs hold a port.
    """

    def __init__(self, count: int, candidates: Optional[Callable[[int], List[int]]] = None):
        self._files = []
        self.ports: List[int] = []
        pick = candidates or free_ports
        os.makedirs(port_lock_dir(), exist_ok=True)
        while len(self.ports) < count:
            for port in pick(count - len(self.ports)):
                if port not in self.ports and self._lock(port):
                    self.ports.append(port)

    def _lock(self, port: int) -> bool:
        path = os.path.join(port_lock_dir(), f"{port}.lock")
        f = open(path, "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # The file we locked may have been released and removed since we opened it.
            ours = os.stat(path).st_ino == os.fstat(f.fileno()).st_ino
        except OSError:
            ours = False
        if not ours:
            f.close()
            return False
        self._files.append(f)
        return True

    def release(self) -> None:
        """Unlocks the ports and removes their lock files."""
        for f in self._files:
            try:
                os.unlink(f.name)  # while still locked: see `_lock`
            except FileNotFoundError:
                pass
            f.close()
        self._files = []
