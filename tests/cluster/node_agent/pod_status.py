"""A pod's status as the kubelet posts it: phase, conditions, container statuses, addresses."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from cluster.node_agent.container_state import Container, now

TERMINAL = ("Succeeded", "Failed")
#: The conditions the kubelet owns (others, such as DisruptionTarget, are kept as they are).
OWN_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                  "PodScheduled")


class PodStatus:
    """Composes one pod's status, keeping each condition's last transition time."""

    def __init__(self):
        self._transitions: Dict[str, tuple] = {}

    def _condition(self, kind: str, true: bool, reason: str = "") -> Dict[str, Any]:
        status = "True" if true else "False"
        previous = self._transitions.get(kind)
        if not previous or previous[0] != status:
            self._transitions[kind] = (status, now())
        condition = {"type": kind, "status": status, "lastProbeTime": None,
                     "lastTransitionTime": self._transitions[kind][1]}
        if reason and not true:
            condition["reason"] = reason
        return condition

    def compose(self, phase: str, init: List[Container], main: List[Container],
                volumes_ready: bool, initialized: bool, ip: Optional[str], node_ip: str,
                start_time: str, others: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The whole status (a merge patch replaces its lists).

        Args:
          phase: The pod's phase.
          init: Its init containers' records.
          main: Its containers' records.
          volumes_ready: Whether its volumes are made (PodReadyToStartContainers).
          initialized: Whether its init containers are done.
          ip: Its address, while it has one.
          node_ip: The node's address.
          start_time: When the node took it.
          others: The conditions on the pod now (those the kubelet does not own are kept).
        """
        all_running = all(c.running for c in main) and phase == "Running"
        not_ready = "PodCompleted" if phase in TERMINAL else "ContainersNotReady"
        status = {
            "phase": phase, "hostIP": node_ip, "hostIPs": [{"ip": node_ip}],
            "startTime": start_time,
            "conditions": [
                self._condition("PodReadyToStartContainers", volumes_ready),
                self._condition("Initialized", initialized, "ContainersNotInitialized"),
                self._condition("Ready", all_running, not_ready),
                self._condition("ContainersReady", all_running, not_ready),
                self._condition("PodScheduled", True),
                *[c for c in others if c["type"] not in OWN_CONDITIONS]],
            "containerStatuses": [c.status() for c in main],
        }
        if init:
            status["initContainerStatuses"] = [c.status() for c in init]
        if ip and phase not in TERMINAL:
            status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
        return status
