"""The objects behind a TrainJob: its JobSet, the JobSet's Jobs and their pods, as the controllers write them.

JobSet v0.12 (`jobset_controller.go`): the JobSet is named after the TrainJob
and owned by it; Job `<jobset>-<rjob>-<i>` carries the `jobset.sigs.k8s.io/*`
labels, as do its pods. The Kubernetes Job controller (Indexed) names a pod
`<job>-<index>-<5 random>`, with hostname `<job>-<index>`, subdomain
`<jobset>`, the label and annotation `batch.kubernetes.io/job-completion-index`
and the variable `JOB_COMPLETION_INDEX`.
"""

from __future__ import annotations

import copy
import functools
import os
import random
import string
from typing import Any, Dict, List, Optional, Tuple

import yaml

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL)
from fakes.kube_server.pods import pending_status
from fakes.kube_server.store import ObjectKey

JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
JOBS = ("batch", "v1", "jobs")
PODS = ("", "v1", "pods")
RUNTIMES = ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")


def owner_reference(obj: Dict[str, Any]) -> Dict[str, Any]:
    """A controller ownerReference to `obj`."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def jobset(trainjob: Dict[str, Any], spec: Dict[str, Any]) -> Tuple[ObjectKey, Dict[str, Any]]:
    """The JobSet of `trainjob`, owned by it."""
    name, namespace = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace,
                         "ownerReferences": [owner_reference(trainjob)]},
            "spec": dict(copy.deepcopy(spec), suspend=bool(trainjob["spec"].get("suspend")))}
    return JOBSETS + (namespace, name), body


def jobset_labels(jobset_obj: Dict[str, Any], replicated_job: str, job_index: int) -> Dict[str, str]:
    """The labels JobSet puts on a Job and its pods (the ones kfdist reads, and a few more)."""
    return {JOBSET_NAME_LABEL: jobset_obj["metadata"]["name"],
            "jobset.sigs.k8s.io/jobset-uid": jobset_obj["metadata"]["uid"],
            REPLICATED_JOB_LABEL: replicated_job, "jobset.sigs.k8s.io/job-index": str(job_index),
            "jobset.sigs.k8s.io/restart-attempt": "0"}


def job(jobset_obj: Dict[str, Any], replicated: Dict[str, Any]) -> Tuple[ObjectKey, Dict[str, Any]]:
    """Job 0 of a replicated Job, owned by the JobSet."""
    name = f"{jobset_obj['metadata']['name']}-{replicated['name']}-0"
    namespace = jobset_obj["metadata"]["namespace"]
    template = copy.deepcopy(replicated["template"])
    metadata = template.get("metadata") or {}
    labels = dict(metadata.get("labels") or {}, **jobset_labels(jobset_obj, replicated["name"], 0))
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "ownerReferences": [owner_reference(jobset_obj)]},
            "spec": dict(template["spec"], completionMode="Indexed",
                         suspend=bool(jobset_obj["spec"].get("suspend"))),
            "status": {}}
    return JOBS + (namespace, name), body


def pod(job_obj: Dict[str, Any], replicated_job: str, index: int,
        jobset_obj: Dict[str, Any]) -> Tuple[ObjectKey, Dict[str, Any]]:
    """Pod `index` of an Indexed Job, as the Job controller creates it (Pending)."""
    job_name, namespace = job_obj["metadata"]["name"], job_obj["metadata"]["namespace"]
    template = copy.deepcopy(job_obj["spec"]["template"])
    metadata = template.get("metadata") or {}
    labels = dict(metadata.get("labels") or {}, **jobset_labels(jobset_obj, replicated_job, 0),
                  **{COMPLETION_INDEX_LABEL: str(index), "batch.kubernetes.io/job-name": job_name})
    annotations = dict(metadata.get("annotations") or {},
                       **{COMPLETION_INDEX_LABEL: str(index)})
    spec = template["spec"]
    spec.update(hostname=f"{job_name}-{index}", subdomain=jobset_obj["metadata"]["name"])
    spec.setdefault("restartPolicy", "OnFailure")  # JobSet's webhook default
    name = f"{job_name}-{index}-" + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": annotations, "ownerReferences": [owner_reference(job_obj)]},
            "spec": spec, "status": pending_status(spec["containers"])}
    return PODS + (namespace, name), body


def resolved_env(container: Dict[str, Any], pod_obj: Dict[str, Any], index: int) -> List[Dict[str, str]]:
    """The container's variables with downward-API values filled in, plus JOB_COMPLETION_INDEX."""
    metadata = pod_obj["metadata"]
    env = []
    for entry in container.get("env") or []:
        field = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        value = entry.get("value", "")
        if field:
            value = _field(metadata, field)
        env.append({"name": entry["name"], "value": str(value)})
    return env + [{"name": "JOB_COMPLETION_INDEX", "value": str(index)}]


def _field(metadata: Dict[str, Any], path: str) -> str:
    if path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return metadata[path.split(".")[1]]
    for where in ("labels", "annotations"):
        prefix = f"metadata.{where}['"
        if path.startswith(prefix) and path.endswith("']"):
            return (metadata.get(where) or {}).get(path[len(prefix):-2], "")
    raise ValueError(f"fieldRef {path!r} is not supported by the test kubelet")


def jobs_status(states: List[Dict[str, int]]) -> List[Dict[str, Any]]:
    """`status.jobsStatus` of the TrainJob (JobSet's replicatedJobsStatus, sorted by name, descending)."""
    return sorted(states, key=lambda s: s["name"], reverse=True)


CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@functools.lru_cache(maxsize=None)
def _documents(path: str) -> tuple:
    with open(path) as f:
        return tuple(d for d in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d)


def install_trainer(store, *, runtimes: bool = True, trainjob_crd: Optional[str] = None) -> None:
    """Installs Kubeflow Trainer into the test cluster: its TrainJob CRD, its own
    `torch-distributed` runtime (tests/data/runtimes, from Trainer v2.3.0) and kfdist's runtimes.

    Args:
      store: The test API server's store.
      runtimes: Also create the ClusterTrainingRuntimes of `manifests/runtimes`.
      trainjob_crd: File name of the TrainJob CRD in tests/data/crds (default: v2.3.0's).
    """
    from fakes import crd_schema

    name = trainjob_crd or crd_schema.CRD_FILES[("TrainJob", "v1alpha1")]
    crd = copy.deepcopy(_documents(crd_schema.crd_path(name))[0])
    store.create(CRDS + ("", crd["metadata"]["name"]), crd)
    if not runtimes:
        return
    torch = _documents(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "data", "runtimes", "torch_distributed.trainer-v2.3.0.yaml"))[0]
    store.create(RUNTIMES + ("", torch["metadata"]["name"]), copy.deepcopy(torch))
    directory = os.path.join(_REPO, "manifests", "runtimes")
    for file_name in sorted(os.listdir(directory)):
        if file_name.endswith(".yaml") and file_name != "kustomization.yaml":
            for doc in _documents(os.path.join(directory, file_name)):
                if doc["kind"] == "ClusterTrainingRuntime":
                    store.create(RUNTIMES + ("", doc["metadata"]["name"]), copy.deepcopy(doc))
