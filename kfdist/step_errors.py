"""How a failed step's error reads on `kfdist run`'s console, and what its log says of the run.

An error kfdist raises on purpose (`components.common.errors`) says what is
wrong and what would be valid; the traceback kfp's executor prints above it
adds nothing for the person running the pipeline, so the console shows the
message alone (the step's whole log keeps the traceback), in the words of
`kfdist run`'s flags: the step names its parameters (`batch_size_per_replica`),
as a Kubeflow Pipelines user sets them, the person typed `--batch-size`
(`flag_wording`). Any other error keeps its traceback: there the frames are
the clue.

kfp's executor starts every step's output with its own records (`[KFP Executor
...]`) and the step's executor input as indented JSON; a step's own lines come
after them. The executor input names the run's directory and the artifacts the
step reads and writes (`executor_input`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from kfdist.flag_wording import command_wording

_TRACEBACK = "Traceback (most recent call last):"
#: The last line of a traceback of an error kfdist raises on purpose (`common.errors`).
_KFDIST_ERROR = re.compile(r"^kfdist\.[\w.]+\.(?P<error>\w+Error): (?P<message>.*)$")
#: A record of kfp's executor (`kfp.dsl.executor_main`), and the one the executor input follows.
_EXECUTOR_RECORD = re.compile(r"^\[KFP Executor [^\]]*\]: ")
_EXECUTOR_INPUT = "Got executor_input:"


def printed_lines(log_path: str) -> List[str]:
    """The non-empty lines a step's process printed (kfp's executor's too), from the step's
    log, without kfp.local's indent of 4; none when there is no log."""
    try:
        with open(log_path) as f:  # the step's own lines, kfp.local indents them
            return [ln.rstrip("\n")[4:] for ln in f if ln.startswith("    ") and ln.strip()]
    except FileNotFoundError:
        return []


def without_kfdist_traceback(lines: List[str]) -> List[str]:
    """A step's lines with the traceback of an error kfdist raised on purpose reduced to its
    message, spelled in `kfdist run`'s flags: it says what is wrong, the frames add nothing
    (the whole log keeps them).

    Args:
      lines: A step's output lines, oldest first.

    Returns:
      The same lines when the last one is not a kfdist error after a traceback.
    """
    if not lines or (m := _KFDIST_ERROR.match(lines[-1])) is None:
        return lines
    starts = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if not starts:
        return lines
    return lines[:starts[-1]] + [f"{m['error']}: {command_wording('run')(m['message'])}"]


def _input_block(lines: List[str], start: int) -> int:
    """The index after the JSON object that starts at `lines[start]` (json.dumps with an
    indent closes it with `}` alone on a line); `start` when no object starts there."""
    if start >= len(lines) or lines[start] != "{":
        return start
    for end in range(start, len(lines)):
        if lines[end] == "}":
            return end + 1
    return len(lines)


def without_executor_lines(lines: List[str]) -> List[str]:
    """A step's own lines: kfp's executor records and the executor input it prints left out.

    Args:
      lines: A step's output lines, oldest first (kfp.local's indent removed).
    """
    kept, i = [], 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if _EXECUTOR_RECORD.match(line) is None:
            kept.append(line)
        elif line.endswith(_EXECUTOR_INPUT):
            i = _input_block(lines, i)
    return kept


def executor_input(lines: List[str]) -> Optional[Dict[str, Any]]:
    """The executor input a step's output starts with (the last one, after a retry).

    Args:
      lines: A step's output lines, oldest first (kfp.local's indent removed).

    Returns:
      The executor input (`inputs`, `outputs` with `outputFile` and the output artifacts'
      `uri`s); None when the lines hold none (the step never started) or it is cut short.
    """
    starts = [i + 1 for i, line in enumerate(lines)
              if _EXECUTOR_RECORD.match(line) and line.endswith(_EXECUTOR_INPUT)]
    if not starts:
        return None
    end = _input_block(lines, starts[-1])
    try:
        found = json.loads("\n".join(lines[starts[-1]:end]))
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def artifact_uri(inputs: Dict[str, Any], side: str, name: str) -> Optional[str]:
    """The URI of a step's input (`side="inputs"`) or output (`"outputs"`) artifact `name`,
    as its executor input gives it; None when it has no such artifact."""
    try:
        return inputs[side]["artifacts"][name]["artifacts"][0]["uri"]
    except (KeyError, IndexError, TypeError):
        return None
