"""A local copy of an object store's prefix, shared by the processes of one machine."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

from kfdist.components.common import storage


def machine_copy(uri: str, name: str, key: str = "") -> str:
    """A local copy of everything below remote `uri`, made once per machine: the processes on
    one machine that ask for the same `uri` and `key` share it (each downloads into a directory
    of its own, and the first to finish moves it into place whole).

    Args:
      uri: The remote prefix.
      name: The copy's directory name in the temporary directory, before a digest of both.
      key: What else the copy belongs to (a job), so that another's is never reused.

    Raises:
      InvalidInputError: If nothing exists under `uri`.
    """
    digest = hashlib.sha256(f"{key}\n{uri}".encode()).hexdigest()[:16]
    target = os.path.join(tempfile.gettempdir(), f"{name}-{digest}")
    if not os.path.isdir(target):
        staging = tempfile.mkdtemp(prefix=f"{name}-{digest}-")
        storage.copy_dir_from(uri, staging)
        try:
            os.rename(staging, target)
        except OSError:  # another process on this machine moved its copy in first
            shutil.rmtree(staging, ignore_errors=True)
    return target
