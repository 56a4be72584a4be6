"""Folds a per-replica value that an error message prints whole into one line of a log.

TensorFlow's `Attempt to convert a value (PerReplica:{...}) with an unsupported type
(<class '...PerReplica'>) to a Tensor.` prints every replica's batch in full inside the
message: some 80 lines of numbers per replica, which bury the lines around them (it is what
Keras 3's `model.fit` raises under a multi-worker strategy). Each replica's log keeps the
message's first and last lines joined on one line, with how many lines were left out between.

Only lines that look like a part of the value are left out (`VALUE_LINE`: a replica's
`0: <tf.Tensor ...`, `array(...`, rows of numbers, `...,`, blank lines). Any other line (a
TensorFlow log line, the next traceback) ends the fold, which is said then, and is passed on.
A log's lines come from several sources (replicas, MPI ranks, a pod's runs): a value is folded
within the lines of its own source. TensorFlow's start-up lines about a GPU it cannot use are
said once, in plain words, on the way (`startup_noise`).
"""

from __future__ import annotations

import re
from typing import Dict, Hashable, Iterable, Iterator, List, Optional, Tuple

from kfdist.components.common import startup_noise

#: The first line of the message whose value is folded (the value starts after it).
FOLD_START = "Attempt to convert a value (PerReplica:{"
#: Its last line.
FOLD_END = "with an unsupported type"
_NUMBER = r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+|nan|inf|True|False)"
#: A line of the printed value: a replica's tensor, an array, a row of numbers, `...,`, blank.
VALUE_LINE = re.compile(
    r"^\s*$"
    r"|^\s+\d+: <tf\.Tensor"
    r"|^\s*array\("
    rf"|^\s*\[*\s*{_NUMBER}\s*(,|\]|$|\s)"
    r"|^\s*\.\.\.,?\s*$"
    r"|^\s*[\])>,]*\s*(shape|dtype)=")


class ValueFolder:
    """Folds the value of each source's message as its lines arrive, one at a time."""

    def __init__(self) -> None:
        self._open: Dict[Hashable, Tuple[str, int]] = {}

    def feed(self, line: str, source: Hashable = None) -> List[str]:
        """The lines to emit for `line` of `source`: none while a value is folded, one (the
        message on one line) when it ends, the folded start and `line` when `line` is not a
        part of the value, else `line` itself (none, or reworded: `startup_noise`)."""
        quiet = startup_noise.quieted(line)
        if quiet is None:
            return []
        line = quiet
        if source in self._open:
            head, count = self._open[source]
            if FOLD_END in line:
                del self._open[source]
                return [_joined(head, count, line)]
            if VALUE_LINE.match(line):
                self._open[source] = (head, count + 1)
                return []
            del self._open[source]
            return [_joined(head, count, None), *self.feed(line, source)]
        if FOLD_START in line and FOLD_END not in line:
            self._open[source] = (line, 0)
            return []
        return [line]

    def flush(self, source: Hashable = None) -> Optional[str]:
        """The folded start of `source`'s value if one is open (its source ended within it),
        as one line, else None; the fold is closed."""
        if source not in self._open:
            return None
        head, count = self._open.pop(source)
        return _joined(head, count, None)

    def flush_all(self) -> List[Tuple[Hashable, str]]:
        """`(source, line)` for each value still open; every fold is closed."""
        return [(source, line) for source in list(self._open)
                for line in [self.flush(source)] if line is not None]


def folded(lines: Iterable[Tuple[Hashable, str]]) -> Iterator[Tuple[Hashable, str]]:
    """`(source, line)` pairs with each source's per-replica values folded, in order."""
    folder = ValueFolder()
    for source, line in lines:
        for out in folder.feed(line, source):
            yield source, out
    yield from folder.flush_all()


def folded_lines(lines: Iterable[str]) -> List[str]:
    """The lines of one source with its per-replica values folded."""
    return [line for _, line in folded((None, line) for line in lines)]


def _joined(head: str, count: int, end: Optional[str]) -> str:
    left_out = f" ... [{count} line(s) of the value left out]"
    return head + left_out + ("" if end is None else " ... " + end.strip())
