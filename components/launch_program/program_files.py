"""A program shipped as a directory (`kfdist launch --program-dir`), with its pinned requirements.

The launch side copies the directory to `<output>/program/` (a remote prefix, or a directory on
the PVC the replicas mount), the requirements file beside the program as `REQUIREMENTS_FILE`.
Every replica then runs `pod_entry` in kfdist's runtime image: it copies the program to its own
scratch directory, installs the requirements there, and runs the command in it. No image is
built; the price is the copy and the `pip install` at every replica start.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional

from kfdist.components.common import storage
from kfdist.components.common.errors import require

#: Where the program lies under the job's output location.
PROGRAM_DIR = "program"
#: The requirements file's name in the shipped program.
REQUIREMENTS_FILE = ".kfdist-requirements.txt"
#: `name==version`, with optional extras and an environment marker: the only lines allowed.
_PINNED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*==\s*[A-Za-z0-9.+!*_-]+"
                     r"(\s*;.*)?")


def program_uri(output: str) -> str:
    """Where the shipped program lies for the job whose output location is `output`."""
    return storage.join(output, PROGRAM_DIR)


def check_requirements(path: str) -> List[str]:
    """The requirement lines of `path`, each pinned to one version.

    Raises:
      InvalidInputError: Naming a missing file or the first line that is not `name==version`.
    """
    require(os.path.isfile(path), f"--requirements {path!r} is not a file")
    lines = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            text = line.split(" #", 1)[0].strip()
            if not text or text.startswith("#"):
                continue
            require(bool(_PINNED.fullmatch(text)),
                    f"--requirements {path!r} line {number}: {text!r} is not pinned to one "
                    "version; write name==version (e.g. tabulate==0.9.0), so that every replica "
                    "installs the same")
            lines.append(text)
    return lines


def check_program(program_dir: str, requirements: Optional[str]) -> None:
    """Refuses a `program_dir` that is not a directory or a requirement that is not pinned,
    before anything is written.

    Raises:
      InvalidInputError: Naming the directory or the line.
    """
    require(os.path.isdir(program_dir), f"--program-dir {program_dir!r} is not a directory")
    if requirements is not None:
        check_requirements(requirements)


def ship(program_dir: str, requirements: Optional[str], output: str) -> str:
    """Copies `program_dir` (and `requirements`), checked by `check_program`, to the job's
    output location; returns its URI."""
    uri = program_uri(output)
    storage.copy_dir_to(program_dir, uri)
    if requirements is not None:
        storage.upload_file(requirements, storage.join(uri, REQUIREMENTS_FILE))
    return uri
