"""The shell blocks of the README and the documentation site, and the tests that run them.

Every ```bash/```sh block a user would run is preceded by a marker naming what runs it:

    <!-- run-by: tests/e2e/test_doc_pipeline_runs.py -->

(one or more test files, each of which reads the block: through `blocks_run_by(__file__)`, or,
for the README's older tests, by reading the README itself), or, when it needs what no test here
has (Google Cloud, a registry, an hour), by why it is not run:

    <!-- not-run: needs Google Cloud Dataflow; ... -->

`tests/unit/test_doc_shell_blocks.py` refuses a block without a marker and parses every `kfdist`
command of every block with the command's own parser.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from typing import List, Optional, Tuple

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
#: The fences of shell blocks.
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
_BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!--\s*(run-by|not-run):\s*((?:(?!-->).)*?)\s*-->\Z", re.S)


@dataclasses.dataclass(frozen=True)
class ShellBlock:
    """One shell block of a Markdown file and the marker before it."""

    doc: str  #: the Markdown file, relative to the repository (`docs/guide/data.md`)
    line: int  #: the line of its opening fence
    code: str
    kind: Optional[str]  #: `run-by`, `not-run`, or None without a marker
    marker: str  #: what follows the kind: test files, or the reason

    @property
    def runners(self) -> Tuple[str, ...]:
        """The test files a `run-by` marker names."""
        return tuple(self.marker.split()) if self.kind == "run-by" else ()

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"

    def commands(self) -> List[str]:
        """The block's commands, one per line: continuation lines and lines inside a quoted
        argument joined, comment lines dropped."""
        commands, pending = [], ""
        for line in self.code.replace("\\\n", " ").splitlines():
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            pending = f"{pending}\n{line}" if pending else line.strip()
            try:
                shlex.split(pending, comments=True)
            except ValueError:  # a quotation still open: the argument goes on
                continue
            commands.append(pending)
            pending = ""
        return commands


def markdown_files() -> List[str]:
    """The README and every page under docs/ (not the site's hooks), relative to the repository."""
    found = ["README.md"]
    for folder, dirs, files in os.walk(os.path.join(ROOT, "docs")):
        dirs[:] = sorted(d for d in dirs if d != "hooks")
        found += sorted(os.path.relpath(os.path.join(folder, f), ROOT)
                        for f in files if f.endswith(".md"))
    return found


def shell_blocks(doc: str) -> List[ShellBlock]:
    """The shell blocks of the Markdown file `doc` (relative to the repository)."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for match in _BLOCK.finditer(text):
        if match.group(1) not in SHELL_LANGUAGES:
            continue
        before = text[:match.start()]
        last_comment = before[before.rfind("<!--"):] if "<!--" in before else ""
        marker = _MARKER.match(last_comment.rstrip())
        blocks.append(ShellBlock(doc=doc, line=before.count("\n") + 1, code=match.group(2),
                                 kind=marker.group(1) if marker else None,
                                 marker=" ".join(marker.group(2).split()) if marker else ""))
    return blocks


def all_shell_blocks() -> List[ShellBlock]:
    """Every shell block of the README and the docs."""
    return [block for doc in markdown_files() for block in shell_blocks(doc)]


def blocks_run_by(test_file: str) -> List[ShellBlock]:
    """The blocks whose marker names `test_file` (a test module's `__file__`)."""
    name = os.path.relpath(os.path.abspath(test_file), ROOT)
    return [block for block in all_shell_blocks() if name in block.runners]


def kfdist_commands(block: ShellBlock) -> List[List[str]]:
    """The arguments after `kfdist` of each `kfdist` command in the block (pipes, `&&` and a
    preceding `VAR=...` aside)."""
    found = []
    for command in block.commands():
        for part in re.split(r"\s*(?:&&|\|\|?|;)\s*", command):
            words = shlex.split(part, comments=True)
            if words and words[0] == "kfdist":
                found.append(words[1:])
    return found
