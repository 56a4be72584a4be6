"""Runs `kfdist` as a user types it and reads its one-line refusals (`kfdist: ...` on stderr)."""

from __future__ import annotations

import subprocess
import sys


def kfdist(*args: str) -> subprocess.CompletedProcess:
    """`python -m kfdist ARGS`, its output captured."""
    return subprocess.run([sys.executable, "-m", "kfdist", *args], capture_output=True,
                          text=True, timeout=300)


def only_line(proc: subprocess.CompletedProcess, prefix: str) -> str:
    """The one `kfdist:` line of `proc`'s stderr, which starts with `prefix` (no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kfdist:")]
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    return lines[0]
