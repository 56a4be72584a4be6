"""Whether a process is still alive, for tests that check nothing outlives a job."""

from __future__ import annotations

import os


def is_running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie left to a non-reaping init counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
