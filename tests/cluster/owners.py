"""Which process owns each running test bed on this machine, so that a bed whose owner died (a
test session SIGKILLed) is found and stopped by the next bed's start, wherever its directory.

A bed started for a process that ends with it (the pytest fixtures) is registered in `REGISTRY`
under its directory's id with its owners' pids and start times: the process that started it and
every pytest worker that joined it (`join`); it is an orphan once none of them runs. A bed a person
starts with `up.sh` has no owner (it runs until `down.sh`). `stop` removes the entry.
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
    """Records that the bed in `root` belongs to process `owner_pid` (this one by default) alone."""
    _write(root, [_owner(owner_pid or os.getpid())])


def join(root: Path) -> None:
    """Adds this process to the owners of the bed in `root` (which another process started)."""
    _write(root, [*_live(_owners(_entry(root))), _owner(os.getpid())])


def leave(root: Path) -> int:
    """Removes this process from the owners of the bed in `root`; returns how many still run."""
    others = [owner for owner in _live(_owners(_entry(root))) if owner["pid"] != os.getpid()]
    _write(root, others)
    return len(others)


def owned(root: Path) -> bool:
    """Whether a process that owns the bed in `root` still runs."""
    return bool(_live(_owners(_entry(root))))


def unregister(root: Path) -> None:
    """Forgets the bed in `root` (stopped); the registry goes with its last entry."""
    _entry(root).unlink(missing_ok=True)
    try:
        REGISTRY.rmdir()
    except OSError:
        pass


def orphans() -> List[Path]:
    """The directories of registered beds none of whose owners is running any more."""
    found = []
    for entry in sorted(REGISTRY.glob("*.json")) if REGISTRY.is_dir() else ():
        try:
            record = json.loads(entry.read_text())
        except (OSError, ValueError):
            entry.unlink(missing_ok=True)
            continue
        if not _live(_owners(entry)):
            found.append(Path(record["root"]))
    return found


def _owner(pid: int) -> dict:
    return {"pid": pid, "start_time": processes.start_time(pid)}


def _owners(entry: Path) -> List[dict]:
    """The owners an entry records (none if it is missing or unreadable)."""
    try:
        record = json.loads(entry.read_text())
    except (OSError, ValueError):
        return []
    return record.get("owners", [])


def _live(owners: List[dict]) -> List[dict]:
    """The owners still running: the same pid with the same start time (not a reused pid)."""
    return [owner for owner in owners if owner["start_time"] is not None
            and processes.start_time(owner["pid"]) == owner["start_time"]]


def _write(root: Path, owners: List[dict]) -> None:
    REGISTRY.mkdir(parents=True, exist_ok=True)
    _entry(root).write_text(json.dumps({"root": str(Path(root).resolve()), "owners": owners}))


def stop_orphans(stop: Callable[[Path], object]) -> List[Path]:
    """Stops (with `stop`) and forgets every bed whose owner died; returns their directories."""
    stopped = orphans()
    for root in stopped:
        stop(root)
        unregister(root)
    return stopped
