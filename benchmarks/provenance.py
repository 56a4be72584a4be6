"""Where each measure's figures come from: the commit, the command, the date and the machine.

`results.json` holds one header per measure (`headers`). A run writes the headers of the
measures it ran; an `--only` run keeps every other measure of an earlier run of the same mode
with that measure's own header (`keep_earlier`), so no figure is ever shown under the commit,
command or date of a run that did not measure it.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Dict, Optional, Sequence

from benchmarks.common import REPO_ROOT, machine


def git_commit(root: str = REPO_ROOT, paths: Sequence[str] = ()) -> Optional[str]:
    """The checkout's commit, with `+dirty` when tracked files differ from it; None outside git.

    Args:
      root: The checkout.
      paths: Git pathspecs: then the last commit that changed them, `+dirty` when they have
        uncommitted changes.
    """
    where = ["--", *paths] if paths else []
    try:
        commit = subprocess.run(["git", "log", "-1", "--format=%H", *where], cwd=root,
                                capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", *where],
                                 cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return (commit + ("+dirty" if changed.strip() else "")) if commit else None


def header(command: str) -> Dict[str, Any]:
    """The header of the measures a run makes now with `command`."""
    return {"commit": git_commit(), "command": command,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine()}


def headers_of(earlier: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The per-measure headers of a `results.json`; one written before headers existed gives
    each measure its recorded date, the run's machine and no commit."""
    if "headers" in earlier:
        return earlier["headers"]
    dates = earlier.get("measured") or {}
    return {name: {"commit": None, "command": None, "date": dates.get(name, earlier.get("date")),
                   "machine": earlier.get("machine")} for name in earlier.get("measures", {})}


def keep_earlier(result: Dict[str, Any], earlier: Optional[Dict[str, Any]]) -> None:
    """Adds to `result` the measures of `earlier` (a `results.json` of the same mode) that
    `result` did not run, each with its own header, untouched.

    Args:
      result: This run's results: `mode`, `measures` and `headers` (by measure).
      earlier: The earlier results, or None.
    """
    if not earlier or earlier.get("mode") != result["mode"]:
        return
    headers = headers_of(earlier)
    for name, figures in earlier.get("measures", {}).items():
        if name not in result["measures"]:
            result["measures"][name] = figures
            result["headers"][name] = headers.get(name, {})
