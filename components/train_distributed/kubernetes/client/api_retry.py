"""Retrying Kubernetes API calls through transient failures, within a budget.

A 5xx answer, a 429 or a dropped connection (`TransientApiError`) is retried
with exponential backoff (capped) until the failures have lasted longer than
the policy's budget; every other error propagates at once. A success resets
the budget. The sleeps are plain `time.sleep`, so a SIGTERM handler that
raises interrupts them.
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Callable, Optional, TypeVar

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.client.kube_errors import TransientApiError

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying when the API server misbehaves.

    Attributes:
      initial_backoff_seconds: Pause after the first failure.
      max_backoff_seconds: Cap on one pause (doubling stops there).
      budget_seconds: Give up once failures have gone on this long without a success.
    """

    initial_backoff_seconds: float = 0.1
    max_backoff_seconds: float = 3.0
    budget_seconds: float = 60.0

    def __post_init__(self):
        require(0 < self.initial_backoff_seconds <= self.max_backoff_seconds,
                f"RetryPolicy: need 0 < initial_backoff_seconds <= max_backoff_seconds, got "
                f"{self.initial_backoff_seconds} and {self.max_backoff_seconds}")
        require(self.budget_seconds >= 0,
                f"RetryPolicy.budget_seconds must be >= 0, got {self.budget_seconds}")


class Backoff:
    """The state of one retry loop: consecutive failures and when they began."""

    def __init__(self, policy: RetryPolicy, log: Optional[Callable[[str], None]] = None):
        """Starts with no failures.

        Args:
          policy: Pauses and budget.
          log: Where to note each retry (None: silently).
        """
        self._policy = policy
        self._log = log
        self._failures = 0
        self._first_failure: Optional[float] = None

    def reset(self) -> None:
        """Forgets past failures (call after a success)."""
        self._failures = 0
        self._first_failure = None

    def pause_or_raise(self, error: TransientApiError, deadline: Optional[float] = None) -> None:
        """Sleeps before the next attempt, or re-raises `error` once the budget is spent.

        Args:
          error: The failure just seen.
          deadline: A `time.monotonic()` the pause must not pass.

        Raises:
          TransientApiError: When failures have lasted longer than the budget.
        """
        time.sleep(self.next_pause(error, deadline))

    def next_pause(self, error: TransientApiError, deadline: Optional[float] = None) -> float:
        """Counts the failure and returns how long to wait before the next attempt, without
        waiting (for a caller that waits on something else meanwhile).

        Args:
          error: The failure just seen.
          deadline: A `time.monotonic()` the pause must not pass.

        Raises:
          TransientApiError: When failures have lasted longer than the budget.
        """
        now = time.monotonic()
        if self._first_failure is None:
            self._first_failure = now
        elapsed = now - self._first_failure
        if elapsed >= self._policy.budget_seconds:
            raise TransientApiError(
                f"the Kubernetes API kept failing for {elapsed:.0f} s "
                f"({self._failures + 1} attempts); last error: {error}", error.status) from error
        pause = min(self._policy.max_backoff_seconds,
                    self._policy.initial_backoff_seconds * 2 ** self._failures)
        pause *= random.uniform(0.8, 1.0)  # de-synchronise many launchers
        pause = min(pause, self._policy.budget_seconds - elapsed)
        if deadline is not None:
            pause = max(0.0, min(pause, deadline - now))
        self._failures += 1
        if self._log is not None:
            self._log(f"Kubernetes API unavailable ({error}); "
                      f"retry {self._failures} in {pause:.1f} s")
        return pause


def call_with_retry(policy: RetryPolicy, fn: Callable[..., T], *args,
                    log: Optional[Callable[[str], None]] = None, **kwargs) -> T:
    """Calls `fn(*args, **kwargs)`, retrying `TransientApiError` under `policy`.

    Args:
      policy: Pauses and budget.
      fn: The API call.
      *args: Its positional arguments.
      log: Where to note retries.
      **kwargs: Its keyword arguments.

    Returns:
      What `fn` returned.
    """
    backoff = Backoff(policy, log)
    while True:
        try:
            return fn(*args, **kwargs)
        except TransientApiError as error:
            backoff.pause_or_raise(error)
