"""Splits `mpirun --tag-output` back into whole lines per rank.

`mpirun` tags every chunk a rank writes, not every line: a rank whose line arrives in two
writes (an unbuffered Python `print` writes the text, then the newline) shows up as
`[1,0]<stdout>:text` with no newline, possibly followed on the same line by another rank's
chunk, and later `[1,0]<stdout>:` and the newline. A tag therefore means "what follows came from
this rank"; a rank's line ends at the newline that follows its own chunk.
"""

import re
from typing import Dict, Iterable, Iterator, Optional, Tuple

#: A chunk's tag: `[<job>,<rank>]<stdout>:` (Open MPI 5 adds a space after the colon).
TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>: ?")

#: One output line: the rank that wrote it, or None for `mpirun`'s own, and its text.
Line = Tuple[Optional[int], str]


def rank_lines(stream: Iterable[str]) -> Iterator[Line]:
    """The launcher's output as whole lines, each with the rank that wrote it.

    Args:
        stream: The launcher's output, a line at a time, with or without newlines.

    Yields:
        Each line as it completes: text before a line's first tag is `mpirun`'s own, and the last
        tagged rank's line ends with the stream's line; other ranks' chunks wait for their own
        newline. Chunks still waiting when the stream ends come last, by rank.
    """
    partial: Dict[int, str] = {}
    for raw in stream:
        line = raw.rstrip("\n")
        tags = list(TAG.finditer(line))
        if not tags:
            yield None, line
            continue
        if tags[0].start() > 0:
            yield None, line[:tags[0].start()]
        for tag, following in zip(tags, tags[1:] + [None]):
            rank = int(tag.group(1))
            end = following.start() if following else len(line)
            partial[rank] = partial.get(rank, "") + line[tag.end():end]
        last = int(tags[-1].group(1))
        yield last, partial.pop(last)
    yield from sorted(partial.items())
