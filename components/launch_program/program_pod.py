"""The parts every cluster rendering of a `ProgramJob` shares (pure functions)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import posixpath
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kfdist.components.common import storage
from kfdist.components.common.errors import require
from kfdist.components.launch_program import operator_env
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.train_distributed.job.strategy_rules import PVC_MOUNT_PATH
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build import job_validation
from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import QUEUE_NAME_LABEL
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions
from kfdist.components.train_distributed.kubernetes.build.object_store_env import (
    replica_env_entries)
from kfdist.components.train_distributed.kubernetes.build.job_parts import (
    PodExtras, PvcMount, Resources, Toleration, check_labels)
from kfdist.components.train_distributed.kubernetes.build.pod_template import (
    CONTAINER_SECURITY, is_kfdist_image, pod_security, render_resources, toleration_fields)

#: The PVC volume's name in the pods.
PVC_VOLUME = "kfdist-pvc"


@dataclasses.dataclass(frozen=True)
class ProgramPlacement:
    """Where a program job runs on a cluster.

    Attributes:
      name: The job's name (a DNS-1035 label).
      namespace: Its namespace.
      image: The image holding the program (the user's, or kfdist's runtime).
      pvc_name: A PersistentVolumeClaim mounted into every replica at `pvc_mount_path`, where
        the KFDIST_* directories are (None: they are remote URIs the program reads itself).
      pvc_mount_path: Where the PVC is mounted.
      resources: Each replica's CPU, memory and GPUs (a parameter server's and an MPI
        launcher's without GPUs).
      node_selector: Node labels every replica requires.
      service_account: The replica pods' service account (None: the namespace's default).
      labels: The job's labels (Kueue's queue label, when it goes to a queue).
      tolerations: Taints every replica tolerates.
      extras: Affinity, environment and volumes of every replica, as the KFP task gave them.
      store_env: `env` entries giving every replica the S3 store's configuration and keys
        (`object_store_env`), after the job's own variables.
    """

    name: str
    namespace: str
    image: str
    pvc_name: Optional[str] = None
    pvc_mount_path: str = PVC_MOUNT_PATH
    resources: Resources = Resources()
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    service_account: Optional[str] = None
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: Tuple[Toleration, ...] = ()
    extras: PodExtras = PodExtras()
    store_env: Tuple[Mapping[str, Any], ...] = ()

    @property
    def env_names(self) -> List[str]:
        """The variables every replica gets from the placement: the store's, the task's."""
        return [e["name"] for e in self.store_env] + self.extras.env_names

    def validate(self) -> None:
        """Raises InvalidInputError naming a name that is not a DNS-1035 label, a bad PVC,
        quantity, node selector, service account or label."""
        require(k8s.is_dns1035_label(self.name),
                f"job name {self.name!r} is not a DNS-1035 label (lower-case letters, digits, '-')")
        if self.pvc_name is not None:
            PvcMount(claim_name=self.pvc_name, mount_path=self.pvc_mount_path).validate()
        self.resources.validate("Worker resources")
        check_labels("node_selector", self.node_selector)
        check_labels("labels", self.labels)
        job_validation.check_object_name("service_account", self.service_account)
        for toleration in self.tolerations:
            toleration.validate()
        paths = [m["mountPath"] for m in self.extras.volume_mounts]
        if self.pvc_name is not None:
            paths.append(self.pvc_mount_path)
        require(len(set(paths)) == len(paths), f"two volumes mount at the same path: {paths}")

    def check_location(self, what: str, location: Optional[str]) -> None:
        """Raises InvalidInputError unless the replicas can reach `location` (a directory of
        the job): a remote URI (`gs://`, `s3://`, `minio://`), or a path on the PVC."""
        if location is None or storage.is_remote(location):
            return
        root = self.pvc_mount_path.rstrip("/") + "/"
        require(self.pvc_name is not None and posixpath.normpath(location).startswith(root),
                f"{what} {location!r} is not where the replicas can reach it: pass a gs://, "
                f"s3:// or minio:// URI, or a path under {root} with --pvc-name CLAIM (the PVC the "
                "replicas mount there)")


def placement_for(name: str, image: str, options: ClusterOptions) -> ProgramPlacement:
    """The placement of a job named `name` in `image`, with the cluster options' namespace,
    PVC, resources (requests at their limits), node selector, service account and queue, and
    what the KFP task passed on (joined as `kubernetes.task_settings` says)."""
    labels = {QUEUE_NAME_LABEL: options.queue_name} if options.queue_name else {}
    own_mounts = [options.pvc_mount_path] if options.pvc_name else []
    return ProgramPlacement(name, options.namespace or "default", image, options.pvc_name,
                            options.pvc_mount_path, options.worker_resources(),
                            options.replica_node_selector(), options.service_account, labels,
                            options.task.tolerations,
                            options.task.replica_extras(operator_env.INJECTED, own_mounts))


def store_env_for(placement: ProgramPlacement, options: ClusterOptions,
                  locations: Sequence[Optional[str]],
                  environ: Mapping[str, str]) -> Tuple[Dict[str, Any], ...]:
    """The `store_env` of a job whose model and data are at `locations`: the step's S3 endpoint
    and region from `environ` and the keys of `options.object_store_secret` when one is on S3,
    less what the KFP task already gives (`object_store_env`)."""
    return replica_env_entries(options.object_store_secret, locations, environ,
                               placement.extras.env_names)


def default_job_name(job: ProgramJob) -> str:
    """`kfdist-<tf|pt>-<hash>`: the same for the same framework, command, output location and
    `--env` variables, so that running the same launch again re-attaches to its job instead
    of starting another."""
    identity = [job.framework, list(job.command), job.model_dir]
    if job.env:  # another --env is another job (its spec differs), not a re-attach
        identity.append(sorted(job.env.items()))
    key = json.dumps(identity, separators=(",", ":"))
    prefix = "tf" if job.framework == "tensorflow" else "pt"
    return f"kfdist-{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def container(job: ProgramJob, placement: ProgramPlacement, name: str,
              port_name: Optional[str] = None, port: Optional[int] = None,
              gpus: bool = True) -> Dict[str, Any]:
    """The replica container: the program as its command, KFDIST_* in its env, the operator's
    port (when the operator reads one), its resources (`gpus=False`: none requested), and
    kfdist's non-root settings in kfdist's images."""
    spec: Dict[str, Any] = {
        "name": name, "image": placement.image, "command": command(job, placement),
        "env": env(job, placement)}
    if port_name is not None:
        spec["ports"] = [{"name": port_name, "containerPort": port, "protocol": "TCP"}]
    resources = render_resources(placement.resources if gpus
                                 else placement.resources.without_gpus())
    if resources:
        spec["resources"] = resources
    mounts = [{"name": PVC_VOLUME, "mountPath": placement.pvc_mount_path}] if placement.pvc_name \
        else []
    mounts += [copy.deepcopy(dict(m)) for m in placement.extras.volume_mounts]
    if mounts:
        spec["volumeMounts"] = mounts
    if is_kfdist_image(placement.image):
        spec["securityContext"] = dict(CONTAINER_SECURITY)
    return spec


def env(job: ProgramJob, placement: ProgramPlacement) -> List[Dict[str, Any]]:
    """A replica's `env`: the KFDIST_* directories, the job's `--env` variables, the S3
    store's, then what the KFP task passed on (less the variables `--env` set)."""
    own = {**operator_env.kfdist_env(job), **job.env}
    return ([{"name": k, "value": v} for k, v in own.items()]
            + [copy.deepcopy(dict(e)) for e in placement.store_env + placement.extras.env
               if e["name"] not in own])


#: Makes the KFDIST_* directories on the PVC (as `kfdist launch --backend local` makes them)
#: before the program starts; `$0` names it in the shell's messages.
MAKE_DIRS = 'mkdir -p "$KFDIST_MODEL_DIR" "$KFDIST_CHECKPOINT_DIR" && exec "$@"'


def command(job: ProgramJob, placement: ProgramPlacement) -> List[str]:
    """The replica's command: the program, started by `/bin/sh` after it made the job's
    directories when they are on the PVC (a remote directory needs none)."""
    if placement.pvc_name is None:
        return list(job.command)
    return ["/bin/sh", "-c", MAKE_DIRS, "kfdist-launch", *job.command]


def pod_spec(container_spec: Dict[str, Any], placement: ProgramPlacement) -> Dict[str, Any]:
    """A replica's pod spec: the container, and the PVC volume when there is one."""
    pod: Dict[str, Any] = {"containers": [container_spec]}
    pod.update(pod_settings(placement))
    return pod


def pod_settings(placement: ProgramPlacement) -> Dict[str, Any]:
    """The pod-level fields of every replica: the volumes, node selector, affinity,
    tolerations, service account and, in kfdist's images, its non-root security context."""
    pod: Dict[str, Any] = {}
    volumes = [{"name": PVC_VOLUME, "persistentVolumeClaim": {"claimName": placement.pvc_name}}
               ] if placement.pvc_name is not None else []
    volumes += [copy.deepcopy(dict(v)) for v in placement.extras.volumes]
    if volumes:
        pod["volumes"] = volumes
    if placement.node_selector:
        pod["nodeSelector"] = dict(placement.node_selector)
    if placement.extras.affinity:
        pod["affinity"] = copy.deepcopy(dict(placement.extras.affinity))
    if placement.tolerations:
        pod["tolerations"] = [toleration_fields(t) for t in placement.tolerations]
    if placement.service_account:
        pod["serviceAccountName"] = placement.service_account
    if is_kfdist_image(placement.image):
        pod["securityContext"] = pod_security()
    return pod


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
    metadata: Dict[str, Any] = {"name": placement.name, "namespace": placement.namespace}
    if placement.labels:
        metadata["labels"] = dict(placement.labels)
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}
