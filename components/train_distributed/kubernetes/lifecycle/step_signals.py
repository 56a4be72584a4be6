"""SIGTERM as an exception, so a terminated KFP run deletes its job before the step exits.

When a run is terminated in the KFP UI (or the step's pod is evicted), the
kubelet sends SIGTERM and, after the grace period, SIGKILL. Inside
`cancel_on_sigterm`, the first SIGTERM raises `StepCancelled` wherever the main
thread is, even blocked reading a watch stream; code that must finish (deleting
the job) runs inside `shielded()`, where a SIGTERM is only noted and raised
once the shielded block is done. Later SIGTERMs are ignored.

The same block serves the local supervisor and the `kfdist` command, which
also stop on SIGINT (Ctrl-C): `signums` names the signals, and a block
entered while another is active leaves the outer one in charge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from typing import Callable, Iterator, Optional, Sequence

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

    @property
    def exit_code(self) -> int:
        """The status of a process ended by the signal, as shells report it (143, 130)."""
        return 128 + self.signum


@dataclasses.dataclass
class _State:
    active: bool = False
    signum: Optional[int] = None
    raised: bool = False
    shield_depth: int = 0
    on_signal: Optional[Callable[[int], None]] = None


_STATE = _State()


def _on_sigterm(signum, frame) -> None:
    del frame
    if _STATE.signum is not None:
        return  # already stopping
    _STATE.signum = signum
    if _STATE.on_signal is not None:
        _STATE.on_signal(signum)
    if _STATE.shield_depth == 0:
        _STATE.raised = True
        raise StepCancelled(signum)


def active() -> bool:
    """Whether this process is inside a `cancel_on_sigterm` block."""
    return _STATE.active


@contextlib.contextmanager
def cancel_on_sigterm(exit_code: Optional[int] = SIGTERM_EXIT_CODE,
                      signums: Sequence[int] = (signal.SIGTERM,),
                      on_signal: Optional[Callable[[int], None]] = None) -> Iterator[None]:
    """Turns SIGTERM into `StepCancelled` inside the block; restores the old handlers after.

    Must be entered on the main thread (Python delivers signals there). Inside
    an active block (of this process's outer caller), it only runs the body:
    the outer block's signals, callback and exit apply.

    Args:
      exit_code: When the block ends in `StepCancelled`, exit the process with this
        status (`SystemExit`); None lets `StepCancelled` propagate instead.
      signums: The signals that cancel (SIGTERM; also SIGINT for a command a
        person stops with Ctrl-C). Only the first one received counts.
      on_signal: Called with the first signal's number before `StepCancelled`
        is raised (for example to pass the signal on to child processes).

    Yields:
      Nothing; run the launcher inside.
    """
    if _STATE.active:
        yield
        return
    previous = {signum: signal.signal(signum, _on_sigterm) for signum in signums}
    _STATE.active, _STATE.signum, _STATE.raised, _STATE.shield_depth = True, None, False, 0
    _STATE.on_signal = on_signal
    try:
        yield
    except StepCancelled:
        if exit_code is None:
            raise
        raise SystemExit(exit_code) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _STATE.active, _STATE.on_signal = False, None


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

