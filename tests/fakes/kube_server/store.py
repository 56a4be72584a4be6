"""The state behind the test API server: objects, resourceVersions, watch history, pod logs.

Semantics kept from the real apiserver: one global, monotonically increasing
resourceVersion; every change is an event (ADDED, MODIFIED, DELETED) kept in a
bounded history; a watch from a resourceVersion older than that history gets
410 Gone; deleting an owner deletes its dependents (ownerReferences).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime
import threading
import uuid
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

Resource = Tuple[str, str, str]  # (group, version, plural); core group is ""
ObjectKey = Tuple[str, str, str, str, str]  # resource + (namespace, name)


class AlreadyExists(Exception):
    """An object with that key exists."""


class NotFound(Exception):
    """No object with that key."""


class Gone(Exception):
    """A watch asked for history that is no longer kept."""


@dataclasses.dataclass(frozen=True)
class StoredEvent:
    """One change, as a watch would deliver it."""

    resource_version: int
    type: str
    key: ObjectKey
    object: Dict[str, Any]


@dataclasses.dataclass
class PodLog:
    """The lines a container wrote; `closed` once it stopped."""

    lines: List[str] = dataclasses.field(default_factory=list)
    closed: bool = False


def now_rfc3339() -> str:
    """The current time as Kubernetes writes timestamps."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """Thread-safe objects with watch history; `changed` is notified on every change."""

    def __init__(self, retained_events: int = 10_000):
        self.changed = threading.Condition()
        self._objects: Dict[ObjectKey, Dict[str, Any]] = {}
        self._history: Deque[StoredEvent] = collections.deque()
        self._retained = retained_events
        self._resource_version = 1000
        self._compacted_through = 0  # watches from below this get 410
        self._logs: Dict[str, PodLog] = {}
        self.on_create: List[Callable[[ObjectKey, Dict[str, Any]], None]] = []

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion."""
        return self._resource_version

    def create(self, key: ObjectKey, obj: Dict[str, Any]) -> Dict[str, Any]:
        """Stores a new object, filling uid, resourceVersion and creationTimestamp."""
        with self.changed:
            if key in self._objects:
                raise AlreadyExists(key)
            obj = copy.deepcopy(obj)
            metadata = obj.setdefault("metadata", {})
            metadata.update(name=key[4], uid=str(uuid.uuid4()), generation=1,
                            creationTimestamp=now_rfc3339())
            if key[3]:
                metadata["namespace"] = key[3]
            stored = self._record("ADDED", key, obj)
        for hook in list(self.on_create):
            hook(key, copy.deepcopy(stored))
        return stored

    def get(self, key: ObjectKey) -> Dict[str, Any]:
        """A copy of the object; raises NotFound."""
        with self.changed:
            if key not in self._objects:
                raise NotFound(key)
            return copy.deepcopy(self._objects[key])

    def update(self, key: ObjectKey, mutate: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
        """Applies `mutate` to a copy of the object and stores it as a MODIFIED event."""
        with self.changed:
            if key not in self._objects:
                raise NotFound(key)
            obj = copy.deepcopy(self._objects[key])
            mutate(obj)
            return self._record("MODIFIED", key, obj)

    def delete(self, key: ObjectKey) -> Dict[str, Any]:
        """Removes the object and, recursively, everything it owns."""
        with self.changed:
            if key not in self._objects:
                raise NotFound(key)
            obj = self._objects.pop(key)
            deleted = self._record("DELETED", key, obj)
            uid = obj["metadata"]["uid"]
            if uid in self._logs:
                self._logs[uid].closed = True
            for dependent in [k for k, o in self._objects.items() if _owned_by(o, uid)]:
                if dependent in self._objects:
                    self.delete(dependent)
            return deleted

    def items(self, resource: Resource, namespace: Optional[str] = None) -> List[Dict[str, Any]]:
        """Copies of all objects of a resource (in a namespace), by name."""
        with self.changed:
            return [copy.deepcopy(o) for k, o in sorted(self._objects.items())
                    if k[:3] == resource and (namespace is None or k[3] == namespace)]

    def events_after(self, resource: Resource, namespace: str, after: int,
                     wait_seconds: float) -> List[StoredEvent]:
        """Events of a resource after resourceVersion `after`, waiting a while for one.

        Raises:
          Gone: `after` is older than the retained history.
        """
        with self.changed:
            for attempt in range(2):
                if after < self._compacted_through:
                    raise Gone(f"too old resource version: {after} ({self._compacted_through})")
                found = [e for e in self._history if e.resource_version > after
                         and e.key[:3] == resource and e.key[3] == namespace]
                if found or attempt:
                    return found
                self.changed.wait(wait_seconds)
        return []

    def compact(self) -> None:
        """Forgets all history: a watch from any older resourceVersion now gets 410."""
        with self.changed:
            self._history.clear()
            self._compacted_through = self._resource_version

    # Pod logs ----------------------------------------------------------------

    def append_log(self, pod_uid: str, line: str) -> None:
        """Adds a line to a container's log."""
        with self.changed:
            self._logs.setdefault(pod_uid, PodLog()).lines.append(line)
            self.changed.notify_all()

    def close_log(self, pod_uid: str) -> None:
        """Marks a container's log complete (the container stopped)."""
        with self.changed:
            self._logs.setdefault(pod_uid, PodLog()).closed = True
            self.changed.notify_all()

    def open_log(self, pod_uid: str) -> PodLog:
        """The log of the container's current run, which a stream reads to its end."""
        with self.changed:
            return self._logs.setdefault(pod_uid, PodLog())

    def read_log(self, pod_uid, start: int, wait_seconds: float) -> Tuple[List[str], bool]:
        """Lines from index `start` (waiting a while for some) and whether the log is closed.

        Args:
          pod_uid: The pod's uid (its current run), or a `PodLog` from `open_log`.
        """
        with self.changed:
            log = pod_uid if isinstance(pod_uid, PodLog) else self._logs.setdefault(pod_uid, PodLog())
            if len(log.lines) <= start and not log.closed:
                self.changed.wait(wait_seconds)
            return log.lines[start:], log.closed and len(log.lines) <= start

    def _record(self, event_type: str, key: ObjectKey, obj: Dict[str, Any]) -> Dict[str, Any]:
        self._resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self._resource_version)
        if event_type != "DELETED":
            self._objects[key] = obj
        self._history.append(StoredEvent(self._resource_version, event_type, key, copy.deepcopy(obj)))
        while len(self._history) > self._retained:
            self._compacted_through = self._history.popleft().resource_version
        self.changed.notify_all()
        return copy.deepcopy(obj)


def _owned_by(obj: Dict[str, Any], uid: str) -> bool:
    return any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])
