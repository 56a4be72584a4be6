"""One bed for all the pytest workers of a test run: the first worker that needs it starts it, the
others join it, and the last to leave stops it (and checks that nothing of it is left).

The genuine node can run once per machine, and its tests are more than one worker can run within
CI's time, so several xdist groups use the same bed. A file lock beside the bed's directory makes
starting, joining and leaving one step each; `owners` records every worker that uses the bed, so
that the bed is an orphan (stopped by the next bed's start) only once none of them runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from cluster import bed as test_bed
from cluster import owners, processes


def run_root(tmp_path_factory, name: str) -> Path:
    """The directory `name` that every worker of this test run shares: in the parent of the
    worker's base temporary directory under pytest-xdist, in the base directory otherwise."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def enter(root: Path, start: Callable[[Path], test_bed.Bed]) -> test_bed.Bed:
    """The bed in `root`: joined when a living worker runs it, else started with `start(root)`
    (which registers this process as its owner, and stops a bed whose owners all died)."""
    with processes.locked(root):  # one worker starts, joins or leaves it at a time
        if processes.running(root) and owners.owned(root):
            owners.join(root)
            return test_bed.load(root)
        return start(root)


def leave(root: Path, stop: Callable[[Path], None]) -> None:
    """Leaves the bed in `root`, stopping it with `stop(root)` when no other worker uses it."""
    with processes.locked(root):
        if owners.leave(root) == 0:
            stop(root)
