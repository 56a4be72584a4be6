"""Folds a per-replica value that an error message prints whole into one line of a log.

TensorFlow's `Attempt to convert a value (PerReplica:{...}) with an unsupported type
(<class '...PerReplica'>) to a Tensor.` prints every replica's batch in full inside the
message: some 80 lines of numbers per replica, which bury the lines around them (it is what
Keras 3's `model.fit` raises under a multi-worker strategy). Each replica's log keeps the
message's first and last lines joined on one line, with how many lines were left out between.

A log's lines come from several sources (replicas, MPI ranks): a value is folded within the
lines of its own source.
"""

from __future__ import annotations

from typing import Dict, Hashable, Iterable, Iterator, List, Optional, Tuple

#: The first line of the message whose value is folded (the value starts after it).
FOLD_START = "Attempt to convert a value (PerReplica:{"
#: Its last line.
FOLD_END = "with an unsupported type"
#: A value longer than this is not that message's: its lines are let through again.
MAX_FOLDED_LINES = 5000


class ValueFolder:
    """Folds the value of each source's message as its lines arrive, one at a time."""

    def __init__(self) -> None:
        self._open: Dict[Hashable, Tuple[str, int]] = {}

    def feed(self, line: str, source: Hashable = None) -> List[str]:
        """The lines to emit for `line` of `source`: none while a value is folded, one (the
        message on one line) when it ends, else `line` itself."""
        if source in self._open:
            head, count = self._open[source]
            if FOLD_END in line:
                del self._open[source]
                return [_joined(head, count, line)]
            if count + 1 < MAX_FOLDED_LINES:
                self._open[source] = (head, count + 1)
                return []
            del self._open[source]
            return [_joined(head, count, None), line]
        if FOLD_START in line and FOLD_END not in line:
            self._open[source] = (line, 0)
            return []
        return [line]

    def flush(self) -> List[Tuple[Hashable, str]]:
        """`(source, line)` for each value still open (its source ended within it)."""
        out = [(source, _joined(head, count, None)) for source, (head, count) in self._open.items()]
        self._open.clear()
        return out


def folded(lines: Iterable[Tuple[Hashable, str]]) -> Iterator[Tuple[Hashable, str]]:
    """`(source, line)` pairs with each source's per-replica values folded, in order."""
    folder = ValueFolder()
    for source, line in lines:
        for out in folder.feed(line, source):
            yield source, out
    yield from folder.flush()


def folded_lines(lines: Iterable[str]) -> List[str]:
    """The lines of one source with its per-replica values folded."""
    return [line for _, line in folded((None, line) for line in lines)]


def _joined(head: str, count: int, end: Optional[str]) -> str:
    left_out = f" ... [{count} line(s) of the value left out]"
    return head + left_out + ("" if end is None else " ... " + end.strip())
