"""The parts every cluster rendering of a `ProgramJob` shares (pure functions)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict

from kfdist.components.common.errors import require
from kfdist.components.launch_program import operator_env
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s


@dataclasses.dataclass(frozen=True)
class ProgramPlacement:
    """Where a program job runs on a cluster.

    Attributes:
      name: The job's name (a DNS-1035 label).
      namespace: Its namespace.
      image: The image holding the program (the user's, or kfdist's runtime).
    """

    name: str
    namespace: str
    image: str

    def validate(self) -> None:
        """Raises InvalidInputError naming a name that is not a DNS-1035 label."""
        require(k8s.is_dns1035_label(self.name),
                f"job name {self.name!r} is not a DNS-1035 label (lower-case letters, digits, '-')")


def container(job: ProgramJob, placement: ProgramPlacement, name: str, port_name: str,
              port: int) -> Dict[str, Any]:
    """The replica container: the program as its command, KFDIST_* in its env, the operator's port."""
    return {"name": name, "image": placement.image, "command": list(job.command),
            "env": [{"name": k, "value": v} for k, v in operator_env.kfdist_env(job).items()],
            "ports": [{"name": port_name, "containerPort": port, "protocol": "TCP"}]}


def run_policy(job: ProgramJob) -> Dict[str, Any]:
    """`spec.runPolicy` of a Training Operator job: clean-up, backoff limit, deadline."""
    policy: Dict[str, Any] = {"cleanPodPolicy": "Running"}
    if job.backoff_limit is not None:
        policy["backoffLimit"] = job.backoff_limit
    if job.active_deadline_seconds is not None:
        policy["activeDeadlineSeconds"] = int(job.active_deadline_seconds)
    return policy


def body(kind, placement: ProgramPlacement, spec: Dict[str, Any]) -> Dict[str, Any]:
    """The whole object: apiVersion, kind, metadata and `spec`."""
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": placement.name, "namespace": placement.namespace}, "spec": spec}
