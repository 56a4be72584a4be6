"""Pieces of a rendered job that TFJob and MPIJob share: pod templates, runPolicy, metadata.

Everything here is plain data in the shape of the Kubernetes API (camelCase
keys), built from a validated `ClusterJobSpec`. Optional fields are left out
rather than written as null or empty, so the objects match the CRD schemas
exactly.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kfdist import IMAGE_GID, IMAGE_UID
from kfdist.images import is_kfdist_image
from kfdist.components.train_distributed.kubernetes.build.job_parts import GPU_RESOURCE, Resources, Toleration
from kfdist.components.train_distributed.kubernetes.build.job_spec import ClusterJobSpec

#: The container settings of kfdist's own images: no privilege escalation, no capabilities.
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

#: Pod annotation that keeps Istio from injecting its sidecar.
ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject"


def job_metadata(spec: ClusterJobSpec) -> Dict[str, Any]:
    """`metadata` of the job: name, namespace, labels, annotations; no ownerReferences.

    The launcher adds the ownerReference to its own pod when it submits.
    """
    metadata: Dict[str, Any] = {"name": spec.name, "namespace": spec.namespace}
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    if spec.annotations:
        metadata["annotations"] = dict(spec.annotations)
    return metadata


def render_resources(resources: Resources) -> Dict[str, Dict[str, Any]]:
    """A container's `resources`: requests and limits; GPUs as `nvidia.com/gpu` limits."""
    requests = {k: v for k, v in (("cpu", resources.cpu), ("memory", resources.memory)) if v is not None}
    limits: Dict[str, Any] = {k: v for k, v in (("cpu", resources.cpu_limit),
                                                ("memory", resources.memory_limit)) if v is not None}
    if resources.gpus:
        limits[GPU_RESOURCE] = resources.gpus
    limits.update(resources.accelerators)
    rendered = {}
    if requests:
        rendered["requests"] = requests
    if limits:
        rendered["limits"] = limits
    return rendered


def render_run_policy(spec: ClusterJobSpec) -> Dict[str, Any]:
    """`spec.runPolicy` (never fields at the spec root, where the API server prunes them):
    the run policy's clean-up and scheduling, the layout's backoff limit and deadline."""
    policy, layout = spec.run_policy, spec.layout
    deadline = layout.active_deadline_seconds
    rendered: Dict[str, Any] = {"cleanPodPolicy": policy.clean_pod_policy}
    for key, value in (("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
                       ("activeDeadlineSeconds", None if deadline is None else int(deadline)),
                       ("backoffLimit", layout.backoff_limit)):
        if value is not None:
            rendered[key] = value
    sched = policy.scheduling_policy
    if sched is not None:
        fields = (("minAvailable", sched.min_available), ("queue", sched.queue),
                  ("priorityClass", sched.priority_class),
                  ("scheduleTimeoutSeconds", sched.schedule_timeout_seconds))
        rendered["schedulingPolicy"] = {k: v for k, v in fields if v is not None}
    return rendered


def _volumes(spec: ClusterJobSpec) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    volumes, mounts = [], []
    for i, pvc in enumerate(spec.volumes):
        name = f"kfdist-pvc-{i}"
        source: Dict[str, Any] = {"claimName": pvc.claim_name}
        if pvc.read_only:
            source["readOnly"] = True
        volumes.append({"name": name, "persistentVolumeClaim": source})
        mount: Dict[str, Any] = {"name": name, "mountPath": pvc.mount_path}
        if pvc.read_only:
            mount["readOnly"] = True
        if pvc.sub_path:
            mount["subPath"] = pvc.sub_path
        mounts.append(mount)
    extras = spec.extras  # the KFP task's, after kfdist's own
    volumes += [copy.deepcopy(dict(v)) for v in extras.volumes]
    mounts += [copy.deepcopy(dict(m)) for m in extras.volume_mounts]
    return volumes, mounts


def container_env(spec: ClusterJobSpec) -> List[Dict[str, Any]]:
    """The replica container's `env`: the job's variables (values, then references), then
    those the KFP task passed on."""
    return ([{"name": k, "value": v} for k, v in spec.env.items()]
            + [copy.deepcopy(dict(e)) for e in spec.env_refs]
            + [copy.deepcopy(dict(e)) for e in spec.extras.env])


def pod_security() -> Dict[str, Any]:
    """The pod `securityContext` of kfdist's images: their non-root user, who also owns (as
    `fsGroup`) the volumes it writes, such as a PVC work location a provisioner made root's."""
    return {"runAsNonRoot": True, "runAsUser": IMAGE_UID, "runAsGroup": IMAGE_GID,
            "fsGroup": IMAGE_GID}


def toleration_fields(t: Toleration) -> Dict[str, Any]:
    """A toleration as the pod spec spells it (unset fields left out)."""
    fields = (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect),
              ("tolerationSeconds", t.toleration_seconds))
    return {k: v for k, v in fields if v is not None}


def pod_template(spec: ClusterJobSpec, replica_type: str, container_name: str, *,
                 command: Sequence[str] = (), args: Sequence[str] = (),
                 ports: Sequence[Dict[str, Any]] = (),
                 service_account: Optional[str] = None) -> Dict[str, Any]:
    """The pod template of one replica type: one container plus the job-wide pod settings.

    Args:
      spec: The validated job.
      replica_type: `Chief`, `PS`, `Worker`, `Evaluator` or `Launcher`: picks resources.
      container_name: The container's name (`tensorflow` for TFJob: the
        Training Operator injects TF_CONFIG into that container only).
      command: Container command; empty keeps the image's entrypoint (and, for
        MPI workers, lets the operator run `sshd`).
      args: Container arguments.
      ports: Container ports.
      service_account: Service account; None leaves it to the operator/namespace default.

    Returns:
      A `PodTemplateSpec` as plain data. No `restartPolicy`: the operator sets
      it from the replica spec's.
    """
    volumes, mounts = _volumes(spec)
    container: Dict[str, Any] = {"name": container_name, "image": spec.image}
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    container["env"] = container_env(spec)
    if ports:
        container["ports"] = [dict(p) for p in ports]
    resources = render_resources(spec.resources_for(replica_type))
    if resources:
        container["resources"] = resources
    if mounts:
        container["volumeMounts"] = mounts
    pod: Dict[str, Any] = {"containers": [container]}
    if is_kfdist_image(spec.image):
        container["securityContext"] = dict(CONTAINER_SECURITY)
        pod["securityContext"] = pod_security()
    if volumes:
        pod["volumes"] = volumes
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.extras.affinity:
        pod["affinity"] = copy.deepcopy(dict(spec.extras.affinity))
    if spec.tolerations:
        pod["tolerations"] = [toleration_fields(t) for t in spec.tolerations]
    if service_account:
        pod["serviceAccountName"] = service_account
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in spec.image_pull_secrets]
    metadata: Dict[str, Any] = {}
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    if not spec.istio_sidecar:
        metadata["annotations"] = {ISTIO_INJECT_ANNOTATION: "false"}
    template: Dict[str, Any] = {"spec": pod}
    if metadata:
        template = {"metadata": metadata, "spec": pod}
    return template
