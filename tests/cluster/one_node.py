"""One genuine node per machine: its beds share containerd's root, /run/containerd, the kubelet's
fixed paths and kube-proxy's iptables chains, so a second would take the first one's pods and
rules. A bed that starts a node takes the machine's node record (under a lock); its stop gives
it back. A record whose bed runs no process any more (it crashed) is taken over.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from cluster import owners, processes

#: The record of the bed that runs this machine's node, beside containerd's root.
RECORD = "node-bed"
POLL_S = 5.0


def _record(cache: Path) -> Path:
    return cache / RECORD


def holder(cache: Path) -> Optional[Path]:
    """The directory of the bed whose node runs (or is starting) on this machine, or None."""
    try:
        root = Path(_record(cache).read_text().strip())
    except OSError:
        return None
    return root if processes.running(root) or owners.owned(root) else None


def take(cache: Path, root: Path) -> None:
    """Records the bed in `root` as the machine's node; fails naming the bed that has it."""
    with processes.locked(_record(cache)):
        other = holder(cache)
        if other is not None and other != root:
            raise processes.StartFailed(
                f"a genuine node already runs on this machine, the test bed in {other} (one "
                f"per machine): stop it first (bash tests/cluster/down.sh {other})")
        _record(cache).write_text(str(root))


def give_back(cache: Path, root: Path) -> None:
    """Forgets the record if it names the bed in `root` (stopped)."""
    with processes.locked(_record(cache)):
        try:
            if Path(_record(cache).read_text().strip()) == root:
                _record(cache).unlink()
        except OSError:
            pass


def wait_until_free(cache: Path, seconds: float) -> None:
    """Returns once no bed runs this machine's node; fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while (other := holder(cache)) is not None:
        if time.monotonic() > deadline:
            raise processes.StartFailed(f"the genuine node of the bed in {other} still runs "
                                        f"after {seconds:.0f} s")
        time.sleep(POLL_S)
