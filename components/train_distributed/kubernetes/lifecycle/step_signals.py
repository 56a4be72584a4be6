"""SIGTERM as an exception, so a terminated KFP run deletes its job before the step exits.

When a run is terminated in the KFP UI (or the step's pod is evicted), the
kubelet sends SIGTERM and, after the grace period, SIGKILL. Inside
`cancel_on_sigterm`, the first SIGTERM raises `StepCancelled` wherever the main
thread is, even blocked reading a watch stream; code that must finish (deleting
the job) runs inside `shielded()`, where a SIGTERM is only noted and raised
once the shielded block is done. Later SIGTERMs are ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from typing import Iterator, Optional

#: The exit status of a process ended by SIGTERM, as shells report it.
SIGTERM_EXIT_CODE = 128 + signal.SIGTERM


class StepCancelled(BaseException):
    """The step was asked to stop (SIGTERM).

    A `BaseException`, like `KeyboardInterrupt`, so that `except Exception`
    in retry loops does not swallow it.
    """

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(f"received {signal.Signals(signum).name}: the run was terminated")
        self.signum = signum


@dataclasses.dataclass
class _State:
    active: bool = False
    signum: Optional[int] = None
    raised: bool = False
    shield_depth: int = 0


_STATE = _State()


def _on_sigterm(signum, frame) -> None:
    del frame
    if _STATE.signum is not None:
        return  # already stopping
    _STATE.signum = signum
    if _STATE.shield_depth == 0:
        _STATE.raised = True
        raise StepCancelled(signum)


@contextlib.contextmanager
def cancel_on_sigterm(exit_code: Optional[int] = SIGTERM_EXIT_CODE) -> Iterator[None]:
    """Turns SIGTERM into `StepCancelled` inside the block; restores the old handler after.

    Must be entered on the main thread (Python delivers signals there).

    Args:
      exit_code: When the block ends in `StepCancelled`, exit the process with this
        status (`SystemExit`); None lets `StepCancelled` propagate instead.

    Yields:
      Nothing; run the launcher inside.
    """
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _STATE.active, _STATE.signum, _STATE.raised, _STATE.shield_depth = True, None, False, 0
    try:
        yield
    except StepCancelled:
        if exit_code is None:
            raise
        raise SystemExit(exit_code) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        _STATE.active = False


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Defers a SIGTERM that arrives inside the block until the block is done.

    A no-op outside `cancel_on_sigterm`.
    """
    _STATE.shield_depth += 1
    try:
        yield
    finally:
        _STATE.shield_depth -= 1
        if (_STATE.active and _STATE.shield_depth == 0 and _STATE.signum is not None
                and not _STATE.raised):
            _STATE.raised = True
            raise StepCancelled(_STATE.signum)

