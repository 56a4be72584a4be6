"""Processes that end with the process that started them, even while TensorFlow holds the GIL.

Linux's `prctl(PR_SET_PDEATHSIG, sig)` has the kernel send `sig` to a process
when its parent (the thread that forked it) exits, however it exits, SIGKILL
included; no thread of the child has to run. It survives `exec`, so
`with_parent_death_signal` sets it in a tiny `python -S` wrapper that then
execs the real program: no Python code runs between `fork` and `exec` in the
parent (a `preexec_fn` would, with the parent's other threads' locks held).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import List, Optional, Sequence

#: `PR_SET_PDEATHSIG` from <linux/prctl.h>.
PR_SET_PDEATHSIG = 1

_WRAPPER = (
    "import ctypes,os,sys\n"
    "ctypes.CDLL(None).prctl({option}, int(sys.argv[1]))\n"
    "if os.getppid() != int(sys.argv[2]): os._exit(int(sys.argv[3]))\n"
    "os.execvp(sys.argv[4], sys.argv[4:])\n"
).format(option=PR_SET_PDEATHSIG)


def with_parent_death_signal(argv: Sequence[str], sig: int, gone_exit_code: int) -> List[str]:
    """`argv` run so that it receives `sig` when this process (the thread spawning it) ends.

    Spawn the result from a thread that lives as long as the child should
    (the main thread, or the thread supervising it): the kernel watches the
    forking thread, not the whole process.

    Args:
      argv: The program and its arguments.
      sig: Sent to the program when its parent ends: SIGKILL for a program
        that has nothing to clean up, SIGTERM for one that stops its own
        children on it (`mpirun`).
      gone_exit_code: The exit status when this process had already ended
        before the program could start.

    Returns:
      The command to start instead of `argv`.
    """
    return [sys.executable, "-S", "-c", _WRAPPER, str(int(sig)), str(os.getpid()),
            str(gone_exit_code), *argv]


def die_with_parent(parent: Optional[int] = None, sig: int = signal.SIGKILL) -> bool:
    """Asks the kernel to send `sig` to this process when its parent ends.

    Args:
      parent: The pid the parent must have; None: whichever it is now.
      sig: The signal to receive.

    Returns:
      Whether the parent is still there: False when it had already gone (this
      process was re-parented before the call) or is not `parent`.
    """
    current = os.getppid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(sig))
    return os.getppid() == current and (parent is None or current == parent)
