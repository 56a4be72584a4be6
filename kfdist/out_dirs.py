"""Checks of the directories a `kfdist` command writes into, before it writes anything.

A path given as `--output`, `--out` or `--out-dir` must be, or become, a
writable directory: not a file, not under a file, not on a file system that
refuses writes (`/proc`, a read-only mount). Each check names the flag and the
value, and what would be valid.
"""

from __future__ import annotations

import os
import tempfile

from kfdist.components.common.errors import require


def _nearest_existing(path: str) -> str:
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def check_dir_path(value: str, flag: str) -> None:
    """Refuses a directory path that is a file, lies under one, or cannot be written.

    Nothing is left behind: writability is probed with a temporary file in the
    nearest existing directory, removed at once.

    Args:
      value: The directory path given.
      flag: The command-line option that gave it, for the message.

    Raises:
      InvalidInputError: If `value` or one of its parents is a file, or the
        nearest existing directory refuses new files.
    """
    existing = _nearest_existing(os.path.abspath(value))
    require(os.path.isdir(existing),
            f"{flag} {value!r} cannot be a directory: {existing!r} is a file; pass a new or "
            "existing directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        require(False, f"{flag} {value!r} cannot be written: {existing!r} refuses new files "
                       f"({e.strerror}); pass a writable directory")


def make_out_dir(value: str, flag: str) -> None:
    """Creates the directory `value` after `check_dir_path`, or refuses it.

    Args:
      value: The directory a command writes into (created when missing).
      flag: The command-line option that gave it, for the message.

    Raises:
      InvalidInputError: If it cannot be a writable directory.
    """
    check_dir_path(value, flag)
    try:
        os.makedirs(value, exist_ok=True)
    except OSError as e:
        require(False, f"{flag} {value!r} cannot be created: {e.strerror}; pass a writable "
                       "directory")
