"""TF_CONFIG of a TrainJob replica, derived from its pod's JobSet identity (pure functions).

Kubeflow Trainer v2 injects no TF_CONFIG. kfdist's `kfdist-tensorflow`
ClusterTrainingRuntime runs every replica as one pod of the replicated Job
`node` (an Indexed Job of `numNodes` pods) and gives each container, through
the downward API, the variables in `IDENTITY_ENV`; Kubernetes adds
`JOB_COMPLETION_INDEX`. JobSet (v0.12, the version Trainer v2.3 installs)
names the pods' hosts `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>` under
the subdomain `<jobset>` (a headless Service of that name), so node `i` is
reachable at `<jobset>-node-0-<i>.<jobset>.<namespace>.svc`.

The completion index picks the replica: indexes follow `tf_config.cluster_tasks`
(the chief first if any, then the workers, the parameter servers, the
evaluator), so index 0 is always the replica that writes the outputs. The
TF_CONFIG is then exactly the Training Operator's for the same layout
(`tf_config.tf_config_for`), with these DNS names in place of
`<job>-<type>-<i>.<namespace>.svc`.

Where the pods cannot resolve each other's DNS names (replicas run as
processes on one machine), `NODE_ADDRESSES_ENV` lists every node's
`host:port` by completion index instead.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import tf_config

#: The port every replica's TensorFlow server listens on (the Training Operator's default too).
TF_PORT = 2222
#: Name of the replicated Job whose pods are the TensorFlow replicas.
NODE_JOB = "node"
#: Set by Kubernetes in every pod of an Indexed Job.
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
#: What the runtime passes through the downward API: variable -> the pod field it reads.
IDENTITY_ENV = {
    "KFDIST_JOBSET_NAME": "metadata.labels['jobset.sigs.k8s.io/jobset-name']",
    "KFDIST_REPLICATED_JOB": "metadata.labels['jobset.sigs.k8s.io/replicatedjob-name']",
    "KFDIST_JOB_INDEX": "metadata.labels['jobset.sigs.k8s.io/job-index']",
    "KFDIST_NAMESPACE": "metadata.namespace",
}
#: Optional: `host:port` of every node by completion index, comma-separated.
NODE_ADDRESSES_ENV = "KFDIST_NODE_ADDRESSES"


@dataclasses.dataclass(frozen=True)
class PodIdentity:
    """Where a pod sits in its JobSet.

    Attributes:
      jobset: The JobSet's name (the TrainJob's).
      replicated_job: The replicated Job's name (`node`).
      job_index: Index of the pod's Job among the replicated Job's Jobs.
      completion_index: Index of the pod within its Indexed Job.
      namespace: The pod's namespace.
    """

    jobset: str
    replicated_job: str
    job_index: int
    completion_index: int
    namespace: str

    def hostname(self, pod_index: int) -> str:
        """The host name JobSet gives pod `pod_index` of this pod's Job."""
        return f"{self.jobset}-{self.replicated_job}-{self.job_index}-{pod_index}"

    def address(self, pod_index: int, port: int = TF_PORT) -> str:
        """`<hostname>.<subdomain>.<namespace>.svc:<port>` of pod `pod_index`."""
        return f"{self.hostname(pod_index)}.{self.jobset}.{self.namespace}.svc:{port}"


def pod_identity(environ: Mapping[str, str]) -> Optional[PodIdentity]:
    """The pod's JobSet identity from its environment; None outside a kfdist TrainJob pod.

    Raises:
      InvalidInputError: If some of the variables are set and others are missing or malformed.
    """
    names = list(IDENTITY_ENV) + [COMPLETION_INDEX_ENV]
    present = [n for n in names if environ.get(n, "") != ""]
    if not present or present == [COMPLETION_INDEX_ENV]:
        return None  # not a TrainJob pod (an Indexed Job of another kind sets only the index)
    missing = [n for n in names if n not in present]
    if missing:
        raise InvalidInputError(f"the pod's JobSet identity is incomplete: {missing} unset (the "
                                f"kfdist-tensorflow runtime sets {list(IDENTITY_ENV)} through "
                                "the downward API; Kubernetes sets JOB_COMPLETION_INDEX)")
    try:
        return PodIdentity(environ["KFDIST_JOBSET_NAME"], environ["KFDIST_REPLICATED_JOB"],
                           int(environ["KFDIST_JOB_INDEX"]), int(environ[COMPLETION_INDEX_ENV]),
                           environ["KFDIST_NAMESPACE"])
    except ValueError as e:
        raise InvalidInputError(f"malformed JobSet index in the pod's environment: {e}") from None


def node_addresses(identity: PodIdentity, nodes: int,
                   environ: Mapping[str, str]) -> List[str]:
    """`host:port` of every node, by completion index (`NODE_ADDRESSES_ENV` if set)."""
    listed = environ.get(NODE_ADDRESSES_ENV, "")
    if not listed:
        return [identity.address(i) for i in range(nodes)]
    addresses = [a.strip() for a in listed.split(",")]
    if len(addresses) != nodes or not all(":" in a for a in addresses):
        raise InvalidInputError(f"{NODE_ADDRESSES_ENV}={listed!r} must list {nodes} host:port "
                                "addresses, one per node")
    return addresses


def jobset_tf_config(identity: PodIdentity, counts: Mapping[str, int],
                     environ: Mapping[str, str]) -> Optional[dict]:
    """The TF_CONFIG of the pod `identity` in a job of `counts` replicas by type.

    Args:
      identity: The pod's place in the JobSet.
      counts: Replicas by lower-case type (`config.JobSpec.replica_counts`).
      environ: The pod's environment (for `NODE_ADDRESSES_ENV`).

    Returns:
      The Training Operator's TF_CONFIG for the same layout, or None for a
      single-replica job (as the operator gives none).

    Raises:
      InvalidInputError: If the pod's index is outside the layout.
    """
    layout = tf_config.cluster_tasks({t: [""] * n for t, n in counts.items()})
    if not 0 <= identity.completion_index < len(layout):
        raise InvalidInputError(f"pod index {identity.completion_index} is outside the job's "
                                f"{len(layout)} replicas {dict(counts)}: numNodes does not match "
                                "the job's layout")
    addresses = iter(node_addresses(identity, len(layout), environ))
    by_type: dict = {}
    for task in layout:
        by_type.setdefault(task.type, []).append(next(addresses))
    cluster = tf_config.build_cluster(by_type)
    return tf_config.tf_config_for(cluster, layout[identity.completion_index])
