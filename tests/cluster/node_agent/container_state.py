"""What the node knows of each container of a pod, in the shape of a container status."""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

#: The kubelet's restart back-off: 10 s, doubling, at most 300 s (the first restart is at once).
BACKOFF_S, MAX_BACKOFF_S = 10.0, 300.0


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclasses.dataclass
class Container:
    """What the node knows of one container of the pod."""

    spec: Dict[str, Any]
    attempt: int = 0
    restart_count: int = 0
    podman_name: Optional[str] = None
    container_id: str = ""
    state: Dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: Dict[str, Any] = dataclasses.field(default_factory=dict)
    retry_at: Optional[float] = None  # a restart or image pull is due then
    backoff_s: float = BACKOFF_S
    done: bool = False  # ended and will not run again
    previous_names: List[str] = dataclasses.field(default_factory=list)
    last_name: Optional[str] = None  # the podman name of the run in `last_state`

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def running(self) -> bool:
        return "running" in self.state

    def status(self) -> Dict[str, Any]:
        return {"name": self.name, "image": self.spec["image"], "imageID": "",
                "containerID": self.container_id, "ready": self.running,
                "started": self.running, "restartCount": self.restart_count,
                "state": self.state, "lastState": self.last_state}



def rfc3339(podman_time: str) -> str:
    """podman's `2026-11-26T20:22:42.123456789Z` (or with an offset) as `...T20:22:42Z`."""
    if not podman_time or podman_time.startswith("0001"):
        return ""
    text = podman_time.replace("Z", "+00:00")
    head, _, rest = text.partition(".")
    offset = ""
    for sign in ("+", "-"):
        if sign in rest:
            offset = sign + rest.split(sign, 1)[1]
    try:
        moment = datetime.fromisoformat(head + (offset or "+00:00"))
    except ValueError:
        return ""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
