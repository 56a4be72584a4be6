"""Faults the test API server can inject, and the requests it records."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Dict, List, Optional


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it.

    Attributes:
      method: HTTP method.
      path: URL path without the query.
      query: Query parameters (last value of each).
      verb: Kubernetes verb: get, list, watch, create, delete, patch, update.
      resource: The resource as RBAC names it, e.g. `tfjobs` or `pods/log`.
      at: `time.monotonic()` when it arrived.
      body: The parsed JSON body (None without one), e.g. the object a POST created.
    """

    method: str
    path: str
    query: Dict[str, str]
    verb: str
    resource: str
    at: float
    body: Any = None


@dataclasses.dataclass
class _Failure:
    remaining: int
    status: int
    method: Optional[str]
    path_contains: Optional[str]


class Faults:
    """Thread-safe switches, set by tests, read by the request handler."""

    def __init__(self):
        self._lock = threading.Lock()
        self._failures: List[_Failure] = []
        self.watch_generation = 0
        self._log_drops: List[int] = []

    def fail_next(self, count: int, status: int = 503, method: Optional[str] = None,
                  path_contains: Optional[str] = None) -> None:
        """The next `count` matching requests get `status` (500, 503, 429 ...)."""
        with self._lock:
            self._failures.append(_Failure(count, status, method, path_contains))

    def take_failure(self, method: str, path: str) -> Optional[int]:
        """The status to fail this request with, consuming one injected failure."""
        with self._lock:
            for failure in self._failures:
                if failure.remaining > 0 and failure.method in (None, method) and (
                        failure.path_contains is None or failure.path_contains in path):
                    failure.remaining -= 1
                    return failure.status
        return None

    def drop_watches(self) -> None:
        """Every watch stream open now is cut off mid-stream (no final chunk)."""
        with self._lock:
            self.watch_generation += 1

    def drop_next_log_stream_after(self, lines: int) -> None:
        """The next followed log stream is cut off after `lines` lines."""
        with self._lock:
            self._log_drops.append(lines)

    def take_log_drop(self) -> Optional[int]:
        """Lines after which to cut the log stream starting now, if any."""
        with self._lock:
            return self._log_drops.pop(0) if self._log_drops else None


class RequestLog:
    """Every request the server received, in order."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests: List[RecordedRequest] = []

    def add(self, method: str, path: str, query: Dict[str, str], verb: str, resource: str,
            body: Any = None) -> None:
        """Records a request."""
        with self._lock:
            self._requests.append(RecordedRequest(method, path, query, verb, resource,
                                                  time.monotonic(), body))

    def all(self) -> List[RecordedRequest]:
        """A snapshot of the requests so far."""
        with self._lock:
            return list(self._requests)

    def matching(self, verb: Optional[str] = None,
                 resource: Optional[str] = None) -> List[RecordedRequest]:
        """Requests with this verb and/or resource."""
        return [r for r in self.all() if verb in (None, r.verb) and resource in (None, r.resource)]

    def clear(self) -> None:
        """Forgets the requests so far."""
        with self._lock:
            self._requests.clear()
