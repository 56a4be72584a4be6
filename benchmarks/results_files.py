"""The files a benchmark run writes, and how a run adds to what earlier runs wrote.

A run of the real sizes writes `results.json`, `results.md` and the peer snippet
(`peer_report.SNIPPET`) that the documentation includes; a `--quick` run writes files
of its own (`results-quick.json`, ...), so its small-size figures never replace those.
Every run keeps the measures it did not make from the earlier `results.json` of its
mode, each with its own header (`provenance.keep_earlier`), and writes the peer snippet
only when it measured one of the snippet's measures: a quick or partial run leaves the
other measures' figures and files as they were.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, NamedTuple, Optional

from benchmarks import peer_report, provenance, report


class ResultFiles(NamedTuple):
    """The names, in the run's `--out-dir`, of what a run of one mode writes."""

    figures: str
    markdown: str
    peers: str


def result_files(mode: str) -> ResultFiles:
    """The files of a run of `mode` (`full`: the ones the documentation reads)."""
    suffix = "" if mode == "full" else f"-{mode}"
    return ResultFiles(f"results{suffix}.json", f"results{suffix}.md",
                       peer_report.SNIPPET.replace(".md", f"{suffix}.md"))


def load(path: str) -> Optional[Dict[str, Any]]:
    """The `results.json` at `path`, or None when there is none."""
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_results(result: Dict[str, Any], out_dir: str) -> str:
    """Writes a run's results beside the earlier ones of its mode; returns `results.md`'s text.

    Args:
      result: The run's `mode`, provenance, `seconds`, `measures` and `headers` (by measure);
        the earlier run's other measures and the targets are added to it.
      out_dir: Where the files are.
    """
    from benchmarks.__main__ import target_rows

    files = result_files(result["mode"])
    measured = set(result["measures"])
    provenance.keep_earlier(result, load(os.path.join(out_dir, files.figures)))
    result["targets"] = target_rows(result["measures"])
    with open(os.path.join(out_dir, files.figures), "w") as f:
        json.dump(result, f, indent=2)
    text = report.markdown(result)
    with open(os.path.join(out_dir, files.markdown), "w") as f:
        f.write(text)
    if measured & set(peer_report.SNIPPET_MEASURES):
        with open(os.path.join(out_dir, files.peers), "w") as f:
            f.write(peer_report.snippet(result))
    return text
