"""How a failed step's error reads on `kfdist run`'s console.

An error kfdist raises on purpose (`components.common.errors`) says what is
wrong and what would be valid; the traceback kfp's executor prints above it
adds nothing for the person running the pipeline, so the console shows the
message alone (the step's whole log keeps the traceback), in the words of
`kfdist run`'s flags: the step names its parameters (`batch_size_per_replica`),
as a Kubeflow Pipelines user sets them, the person typed `--batch-size`
(`flag_wording`). Any other error keeps its traceback: there the frames are
the clue.
"""

from __future__ import annotations

import functools
import re
from typing import Dict, List

from kfdist.flag_wording import Flag, flags_of, in_flag_terms

_TRACEBACK = "Traceback (most recent call last):"
#: The last line of a traceback of an error kfdist raises on purpose (`common.errors`).
_KFDIST_ERROR = re.compile(r"^kfdist\.[\w.]+\.(?P<error>\w+Error): (?P<message>.*)$")


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
    return lines[:starts[-1]] + [f"{m['error']}: {in_flag_terms(m['message'], _run_flags())}"]


@functools.lru_cache(maxsize=1)
def _run_flags() -> Dict[str, Flag]:
    """The flags of `kfdist run`, by the parameter each sets."""
    from kfdist.cli import build_parser

    return flags_of(build_parser().subcommands()["run"])
