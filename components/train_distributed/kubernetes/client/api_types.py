"""Plain records the API module hands out: an owner reference, a watch event (no client import)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict


@dataclasses.dataclass(frozen=True)
class OwnerRef:
    """The object a job belongs to (the KFP step's pod), for garbage collection.

    Attributes:
      namespace: Namespace of the owner; owners must share the job's namespace.
      name: The owner's `metadata.name`.
      uid: The owner's `metadata.uid`.
      api_version: The owner's `apiVersion`.
      kind: The owner's `kind`.
    """

    namespace: str
    name: str
    uid: str
    api_version: str = "v1"
    kind: str = "Pod"

    def to_body(self) -> Dict[str, Any]:
        """The `metadata.ownerReferences` entry (not a controller, never blocking)."""
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name,
                "uid": self.uid, "controller": False, "blockOwnerDeletion": False}


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream.

    Attributes:
      type: `ADDED`, `MODIFIED`, `DELETED` or `BOOKMARK`.
      object: The object after the change, as plain data.
    """

    type: str
    object: Dict[str, Any]

    @property
    def resource_version(self) -> str:
        """`metadata.resourceVersion` of the object, the point to resume from."""
        return self.object.get("metadata", {}).get("resourceVersion", "")
