"""TF_CONFIG in the Kubeflow Training Operator's layout (pure functions).

For a TFJob the Training Operator (v1, `genTFConfigJSONStr`) gives every
replica pod an environment variable, the JSON of a Go struct::

    TF_CONFIG={"cluster":{"evaluator":["<job>-evaluator-0.<ns>.svc:2222"],
                          "worker":["<job>-worker-0.<ns>.svc:2222", ...]},
               "task":{"type":"worker","index":1},"environment":"cloud"}

with every replica type in the cluster (the evaluator too), lower-case,
the types in sorted order (a Go map), and no TF_CONFIG at all when the job
has a single replica. `to_env_value` writes exactly that text. This module builds and
reads that layout; it knows nothing about processes or ports, so the local
backend (localhost ports) and a Kubernetes backend (pod DNS names) share it.

Chief rule: a `chief` replica, if the cluster has one, else `worker` 0.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from kfdist.components.common.errors import InvalidInputError

CHIEF = "chief"
WORKER = "worker"
PS = "ps"
EVALUATOR = "evaluator"
#: Replica types in the order the cluster lists (and launchers start) them.
TASK_TYPES: Tuple[str, ...] = (CHIEF, WORKER, PS, EVALUATOR)
TF_CONFIG_ENV = "TF_CONFIG"

Cluster = Dict[str, List[str]]


@dataclasses.dataclass(frozen=True, order=True)
class Task:
    """One replica of the cluster.

    Attributes:
      type: Lower-case replica type: `chief`, `worker`, `ps` or `evaluator`.
      index: Index among the replicas of that type.
    """

    type: str
    index: int

    @property
    def name(self) -> str:
        """`worker:0` style, as in `ReplicaReport.task`."""
        return f"{self.type}:{self.index}"

    @property
    def label(self) -> str:
        """`worker-0` style, used as a log prefix and in file names."""
        return f"{self.type}-{self.index}"


def build_cluster(addresses: Mapping[str, Sequence[str]]) -> Cluster:
    """Returns the `cluster` part of TF_CONFIG for replica addresses by type.

    Args:
      addresses: `host:port` of each replica, by type, e.g.
        `{"worker": ["localhost:4000", "localhost:4001"]}`. Empty types are left out.

    Raises:
      InvalidInputError: On an unknown replica type or more than one chief.
    """
    unknown = sorted(set(addresses) - set(TASK_TYPES))
    if unknown:
        raise InvalidInputError(f"unknown replica types {unknown}; valid: {list(TASK_TYPES)}")
    if len(addresses.get(CHIEF, ())) > 1:
        raise InvalidInputError(f"a cluster has at most one chief, got {len(addresses[CHIEF])}")
    return {t: list(addresses[t]) for t in TASK_TYPES if addresses.get(t)}


def cluster_tasks(cluster: Mapping[str, Sequence[str]]) -> List[Task]:
    """Lists every replica of `cluster`, chief first, then workers, ps, evaluator."""
    return [Task(t, i) for t in TASK_TYPES for i in range(len(cluster.get(t, ())))]


def chief_task(cluster: Mapping[str, Sequence[str]]) -> Task:
    """The replica that writes the outputs: `chief:0` if present, else `worker:0`."""
    if cluster.get(CHIEF):
        return Task(CHIEF, 0)
    if cluster.get(WORKER):
        return Task(WORKER, 0)
    raise InvalidInputError(f"cluster {dict(cluster)} has neither a chief nor a worker")


def tf_config_for(cluster: Mapping[str, Sequence[str]], task: Task) -> Optional[dict]:
    """The TF_CONFIG of `task`, or None for a single-replica cluster (as the operator does).

    Raises:
      InvalidInputError: If `task` is not part of `cluster`.
    """
    tasks = cluster_tasks(cluster)
    if task not in tasks:
        raise InvalidInputError(f"task {task.name} is not in cluster {dict(cluster)}")
    if len(tasks) == 1:
        return None
    return {"cluster": {t: list(cluster[t]) for t in sorted(cluster)},
            "task": {"type": task.type, "index": task.index}, "environment": "cloud"}


def tf_configs(cluster: Mapping[str, Sequence[str]]) -> List[Tuple[Task, Optional[dict]]]:
    """`(task, TF_CONFIG or None)` for every replica, in `cluster_tasks` order."""
    return [(task, tf_config_for(cluster, task)) for task in cluster_tasks(cluster)]


def worker_cluster(host_ports: Sequence[str]) -> Cluster:
    """A workers-only cluster (MultiWorkerMirrored, Horovod-style jobs)."""
    return build_cluster({WORKER: list(host_ports)})


def training_cluster(cluster: Mapping[str, Sequence[str]]) -> Cluster:
    """The cluster without its evaluator: the evaluator is no part of training (it serves nothing)."""
    return {t: list(a) for t, a in cluster.items() if t != EVALUATOR}


def to_env_value(tf_config: dict) -> str:
    """The compact JSON text to put in the TF_CONFIG variable, in the operator's field order."""
    return json.dumps(tf_config, separators=(",", ":"))


def parse_env(environ: Mapping[str, str]) -> Optional[dict]:
    """Reads TF_CONFIG from an environment mapping; None when unset or empty.

    Raises:
      InvalidInputError: If TF_CONFIG is not valid JSON with `cluster` and `task`.
    """
    text = environ.get(TF_CONFIG_ENV, "").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
        Task(str(value["task"]["type"]), int(value["task"]["index"]))
        dict(value["cluster"])
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidInputError(f"malformed {TF_CONFIG_ENV} {text!r}: {e}") from None
    return value


def current_task(tf_config: Optional[dict]) -> Task:
    """The task a TF_CONFIG describes; a lone replica without TF_CONFIG is `worker:0`."""
    if tf_config is None:
        return Task(WORKER, 0)
    return Task(str(tf_config["task"]["type"]).lower(), int(tf_config["task"]["index"]))


def is_chief(tf_config: Optional[dict]) -> bool:
    """Whether the replica with this TF_CONFIG (None: a lone replica) is the chief."""
    if tf_config is None:
        return True
    return current_task(tf_config) == chief_task(tf_config["cluster"])
