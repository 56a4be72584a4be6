"""Environment variables set for the length of a block, and put back after it."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping, Optional


@contextlib.contextmanager
def variables_set(values: Mapping[str, Optional[str]]) -> Iterator[None]:
    """Within the block, `os.environ` has each of `values` that is not None (None: unchanged);
    after it, each variable named is as it was before (unset if it was unset)."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        os.environ.update({name: value for name, value in values.items() if value is not None})
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
