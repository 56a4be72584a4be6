"""Which process owns each running test bed on this machine, so that a bed whose owner died (a
test session SIGKILLed) is found and stopped by the next bed's start, wherever its directory.

A bed started for a process that ends with it (the pytest fixtures) is registered in `REGISTRY`
under its directory's id with the owner's pid and start time; a bed a person starts with `up.sh`
has no owner (it runs until `down.sh`). `stop` removes the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, List, Optional

from cluster import processes

#: One file per owned bed (tmpfs: gone at reboot, with the beds).
REGISTRY = Path("/run/kfdist-test-beds")


def _entry(root: Path) -> Path:
    return REGISTRY / (hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
                       + ".json")


def register(root: Path, owner_pid: Optional[int] = None) -> None:
    """Records that the bed in `root` belongs to process `owner_pid` (this one by default)."""
    pid = owner_pid or os.getpid()
    REGISTRY.mkdir(parents=True, exist_ok=True)
    _entry(root).write_text(json.dumps({"root": str(Path(root).resolve()), "pid": pid,
                                        "start_time": processes.start_time(pid)}))


def unregister(root: Path) -> None:
    """Forgets the bed in `root` (stopped); the registry goes with its last entry."""
    _entry(root).unlink(missing_ok=True)
    try:
        REGISTRY.rmdir()
    except OSError:
        pass


def orphans() -> List[Path]:
    """The directories of registered beds whose owner is no longer running."""
    found = []
    for entry in sorted(REGISTRY.glob("*.json")) if REGISTRY.is_dir() else ():
        try:
            record = json.loads(entry.read_text())
        except (OSError, ValueError):
            entry.unlink(missing_ok=True)
            continue
        running_since = processes.start_time(record["pid"])
        if running_since is None or running_since != record["start_time"]:
            found.append(Path(record["root"]))
    return found


def stop_orphans(stop: Callable[[Path], object]) -> List[Path]:
    """Stops (with `stop`) and forgets every bed whose owner died; returns their directories."""
    stopped = orphans()
    for root in stopped:
        stop(root)
        unregister(root)
    return stopped
