"""The runs of a benchmark kept as each ends, so that a run stopped midway can be resumed.

A full `python -m benchmarks --peers` takes about 110 minutes on 2 cores (TFX's pipeline on the
1,000,000-row table runs 13-14 minutes a round), long enough to be stopped midway. Every run
of a pair, one side of one round (`repeats.run_alternating`), is written to the journal as it
ends. `--resume` takes the runs the journal holds instead of making them again, and makes only
the missing ones.

Runs are only ever combined with runs of the same code on the same machine: the journal's key is
the last commit that changed what is measured (`MEASURED_PATHS`: kfdist's code, the benchmarks
and the peers' programs, not the results files), the mode and the machine. A checkout with
uncommitted changes there cannot resume, and a journal of other code is refused, never mixed in.
A measure's runs leave the journal when its figures are written to results.json; the journal
goes with its last run.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import time
from typing import Any, Dict, Iterator, Optional

from benchmarks import provenance
from benchmarks.common import REPO_ROOT, machine

#: The journal's file in the results' directory, by mode (a quick run does not touch a full one's).
FILE = "journal-{mode}.json"
#: What the figures depend on, as git pathspecs.
MEASURED_PATHS = ("kfdist", "components", "pipelines", "pyproject.toml", "benchmarks",
                  ":(exclude)benchmarks/results*", ":(exclude)benchmarks/journal-*")


class JournalError(Exception):
    """A journal that cannot be used for this run; the message says why and what to do."""


def code_version(root: str = REPO_ROOT) -> Optional[str]:
    """The last commit that changed `MEASURED_PATHS`, with `+dirty` when they have uncommitted
    changes; None outside git."""
    return provenance.git_commit(root, MEASURED_PATHS)


class Journal:
    """The runs of one benchmark run, by measure, pair, round and side, saved as each is added.

    Args:
      path: The journal file.
      key: What the runs were made with (`key_for`).
      runs: Runs already made, by `name`.
    """

    def __init__(self, path: str, key: Dict[str, Any], runs: Optional[Dict[str, Any]] = None):
        self.path, self.key, self.runs = path, key, dict(runs or {})

    @staticmethod
    def name(measure: str, pair: str, index: int, side: int) -> str:
        """One run's entry: `measure/pair/round/side` (round and side counted from 1)."""
        return f"{measure}/{pair}/{index + 1}/{side + 1}"

    def add(self, name: str, figures: Any) -> None:
        """Keeps a run's figures, with the time it ended, and writes the journal."""
        self.runs[name] = {"figures": figures,
                           "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        self._write()

    def _write(self) -> None:
        staging = self.path + ".tmp"
        with open(staging, "w") as f:
            json.dump({"key": self.key, "runs": self.runs}, f, indent=1)
        os.replace(staging, self.path)

    def forget(self, measures) -> None:
        """Drops the runs of `measures` (written to results.json now); removes the journal when
        no run is left, else writes it."""
        written = set(measures)
        self.runs = {name: run for name, run in self.runs.items()
                     if name.split("/", 1)[0] not in written}
        if self.runs:
            self._write()
        elif os.path.exists(self.path):
            os.remove(self.path)

    def earliest(self, measure: str) -> Optional[str]:
        """When the first run of `measure` the journal holds ended, or None."""
        ended = [run["ended"] for name, run in self.runs.items()
                 if name.startswith(measure + "/")]
        return min(ended) if ended else None


def key_for(mode: str) -> Dict[str, Any]:
    """The key of a run of `mode` made now from this checkout, on this machine."""
    return {"code": code_version(), "mode": mode, "machine": machine()}


def open_journal(out_dir: str, mode: str, resume: bool,
                 key: Optional[Dict[str, Any]] = None) -> Journal:
    """The journal of a run about to start.

    Args:
      out_dir: Where results.json goes; the journal lies beside it.
      mode: The run's mode.
      resume: Whether to take the runs an unfinished run left (`--resume`).
      key: What this run's runs are made with; default `key_for(mode)`.

    Raises:
      JournalError: Without `resume`, when an unfinished run left runs (they are not thrown
        away unasked); with it, when they were made by other code, in another mode or on
        another machine, or when the measured code has uncommitted changes.
    """
    path, key = os.path.join(out_dir, FILE.format(mode=mode)), key or key_for(mode)
    earlier = None
    if os.path.isfile(path):
        with open(path) as f:
            try:
                earlier = json.load(f)
            except ValueError as error:
                raise JournalError(f"{path} is not a journal ({error}): delete it to start "
                                   f"over") from None
    if earlier is None:
        return Journal(path, key)
    runs, made = earlier.get("runs", {}), earlier.get("key", {})
    where = f"{path} holds {len(runs)} run(s) of an unfinished run (code {made.get('code')})"
    if not resume:
        raise JournalError(f"{where}: --resume continues it; delete the file to start over")
    if made != key:
        differs = ", ".join(f"{k} {made.get(k)!r} here {key[k]!r}" for k in key
                            if made.get(k) != key[k])
        raise JournalError(f"--resume: {where}, made with {differs}; they are not mixed: "
                           f"delete the file to start over")
    if key["code"] is None or key["code"].endswith("+dirty"):
        raise JournalError(f"--resume: the measured code has uncommitted changes (or no git "
                           f"history): commit them, or delete {path} to start over")
    return Journal(path, key, runs)


_ACTIVE: "contextvars.ContextVar[Optional[tuple]]" = contextvars.ContextVar("journal", default=None)


@contextlib.contextmanager
def recording(journal: Journal, measure: str) -> Iterator[None]:
    """Within the block, `repeats.run_alternating` keeps `measure`'s runs in `journal`."""
    token = _ACTIVE.set((journal, measure))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active() -> Optional[tuple]:
    """`(journal, measure)` of the enclosing `recording`, or None."""
    return _ACTIVE.get()
