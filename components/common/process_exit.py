"""Fast exits for the processes kfdist starts and ends itself: KFP steps and training replicas."""

from __future__ import annotations

import atexit
import gc


def skip_final_collection() -> None:
    """Skips the interpreter's last garbage collection when this process exits.

    A process that imported TensorFlow holds millions of Python objects, and
    the collection Python runs while shutting down walks them all: about a
    second at every step's and every replica's exit, spent freeing memory the
    operating system reclaims anyway. Freezing the heap at exit skips that
    walk; output streams are still flushed and exit handlers still run.

    Only for processes kfdist owns: an object left in a reference cycle then
    gets no `__del__` at exit (which Python never promises).
    """
    atexit.register(gc.freeze)
