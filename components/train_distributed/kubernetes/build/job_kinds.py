"""The Kubernetes job kinds kfdist launches, and a rendered job ready to submit.

Renderers (pure functions) produce a `RenderedJob`; the launcher submits and
follows it through the one module that talks to the Kubernetes API. Nothing
here calls a cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping

#: Label the Training Operator and the MPI Operator put on every pod of a job.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
#: Lower-case replica type of a pod (`chief`, `worker`, `ps`, `evaluator`, `launcher`).
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
#: Index of a pod within its replica type.
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
#: MPI Operator v2beta1's role label (`launcher` or `worker`).
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
#: Labels JobSet puts on every pod of a TrainJob's JobSet (named after the TrainJob).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
#: Kubernetes' label of a pod of an Indexed Job: its completion index.
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@dataclasses.dataclass(frozen=True)
class JobKind:
    """A custom resource kind served by an operator.

    Attributes:
      group: API group, e.g. `kubeflow.org`.
      version: API version, e.g. `v1` or `v2beta1`.
      kind: Kind, e.g. `TFJob`.
      plural: Resource name in URLs, e.g. `tfjobs`.
      operator: Who serves it, for error messages ("install ...").
      install_hint: How to install that operator.
    """

    group: str
    version: str
    kind: str
    plural: str
    operator: str
    install_hint: str

    @property
    def api_version(self) -> str:
        """`group/version`, as in an object's `apiVersion`."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """Name of the CustomResourceDefinition, e.g. `tfjobs.kubeflow.org`."""
        return f"{self.plural}.{self.group}"


TRAINING_OPERATOR_INSTALL = (
    "kubectl apply --server-side -k "
    "\"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.0\"")
MPI_OPERATOR_INSTALL = (
    "kubectl apply --server-side -f "
    "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.2/deploy/v2beta1/mpi-operator.yaml")

TFJOB_V1 = JobKind("kubeflow.org", "v1", "TFJob", "tfjobs",
                   "Kubeflow Training Operator", TRAINING_OPERATOR_INSTALL)
MPIJOB_V2BETA1 = JobKind("kubeflow.org", "v2beta1", "MPIJob", "mpijobs",
                         "MPI Operator", MPI_OPERATOR_INSTALL)
MPIJOB_V1 = JobKind("kubeflow.org", "v1", "MPIJob", "mpijobs",
                    "Kubeflow Training Operator", TRAINING_OPERATOR_INSTALL)
TRAINER_INSTALL = (
    "kubectl apply --server-side -k "
    "\"https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0\" "
    "and kfdist's runtimes: kubectl apply --server-side -k manifests/runtimes")
TRAINJOB_V1ALPHA1 = JobKind("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs",
                            "Kubeflow Trainer", TRAINER_INSTALL)


@dataclasses.dataclass(frozen=True)
class RenderedJob:
    """A job object rendered from a job description, ready to create.

    Attributes:
      kind: Which custom resource it is.
      name: `metadata.name`.
      namespace: `metadata.namespace`.
      body: The whole object (apiVersion, kind, metadata, spec) as plain data.
      log_pod_selector: Labels selecting the pod whose log the step streams
        (the chief, worker 0 without a chief, or the MPI launcher).
    """

    kind: JobKind
    name: str
    namespace: str
    body: Dict[str, Any]
    log_pod_selector: Mapping[str, str]

    def label_selector(self) -> str:
        """`log_pod_selector` in the `k=v,k=v` form list calls take."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.log_pod_selector.items()))

    def pods_selector(self) -> str:
        """Selects every pod of the job: the operators' job-name label, JobSet's for a TrainJob."""
        label = JOBSET_NAME_LABEL if self.kind == TRAINJOB_V1ALPHA1 else JOB_NAME_LABEL
        return f"{label}={self.name}"
