"""Splits `mpirun --tag-output` back into whole lines per rank.

`mpirun` tags every chunk a rank writes, not every line: a rank whose line arrives in two
writes (an unbuffered Python `print` writes the text, then the newline) shows up as
`[1,0]<stdout>:text` with no newline, possibly followed on the same line by another rank's
chunk, and later `[1,0]<stdout>:` and the newline. A tag therefore means "what follows came from
this rank"; a rank's line ends at the newline that follows its own chunk.
"""

import re
from typing import Dict, List, Optional, Tuple

#: A chunk's tag: `[<job>,<rank>]<stdout>:` (Open MPI 5 adds a space after the colon).
TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>: ?")

#: One output line: the rank that wrote it, or None for `mpirun`'s own, and its text.
Line = Tuple[Optional[int], str]


class TaggedOutput:
    """Reassembles ranks' lines from the launcher's output, one output line at a time."""

    def __init__(self) -> None:
        self._partial: Dict[int, str] = {}

    def feed(self, line: str) -> List[Line]:
        """Takes one line of the launcher's output and returns the lines it completes.

        Args:
            line: One line as read from the launcher's pipe, with or without its newline.

        Returns:
            The completed lines in order: text before the first tag is the launcher's own,
            and the last tagged rank's line ends here; other ranks' chunks wait for theirs.
        """
        line = line.rstrip("\n")
        tags = list(TAG.finditer(line))
        if not tags:
            return [(None, line)]
        done: List[Line] = []
        if tags[0].start() > 0:
            done.append((None, line[:tags[0].start()]))
        for tag, following in zip(tags, tags[1:] + [None]):
            rank = int(tag.group(1))
            end = following.start() if following else len(line)
            self._partial[rank] = self._partial.get(rank, "") + line[tag.end():end]
        last = int(tags[-1].group(1))
        done.append((last, self._partial.pop(last)))
        return done

    def rest(self) -> List[Line]:
        """The chunks still waiting for a newline when the output ended, by rank."""
        rest = sorted(self._partial.items())
        self._partial.clear()
        return rest
