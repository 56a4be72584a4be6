"""What a user sets for a training step that runs on a Kubernetes cluster.

The cluster parameters of `job.step_params`, gathered by `runtime.build_job`
(an unset parameter is None here), and what the pipeline author set on the
KFP task itself (`task_settings`). The step turns them, with the `JobConfig`,
into the full job description that the renderers take.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional

from kfdist.images import image as kfdist_image
from kfdist.components.train_distributed.job.strategy_rules import HOROVOD, PVC_MOUNT_PATH
from kfdist.components.common import storage
from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.build.job_parts import Resources
from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import FROM_CREATION, TIMEOUT_FROM
from kfdist.components.train_distributed.kubernetes.task_settings import TaskSettings


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """Cluster settings of one training step.

    Attributes:
      image: Image of every replica (must carry kfdist); pinned tag, no `:latest`.
        None: the kfdist runtime image, or for `horovod` the kfdist Horovod image.
      namespace: Namespace of the job; by default the step's own namespace.
      work_uri: Shared location where the launcher and the replicas exchange the
        job, the dataset and the model: a `gs://`, `s3://` or `minio://` prefix or a
        directory on a PVC mounted at the same path in the step and in the replicas. By
        default, beside a remote dataset artifact.
      pvc_name: PersistentVolumeClaim mounted into every replica at `pvc_mount_path`.
      pvc_mount_path: Where the PVC is mounted.
      gpus_per_worker: `nvidia.com/gpu` limit of each worker.
      cpu_per_worker: CPU request and limit of each worker, e.g. `4` or `500m`.
      memory_per_worker: Memory request and limit of each worker, e.g. `8Gi`.
      node_selector: Node labels every replica requires.
      service_account: Service account of the replica pods.
      object_store_secret: Secret whose `accesskey` and `secretkey` every replica gets as
        AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (by reference, optional) when the work
        location or the dataset is on `s3://` or `minio://`; None: no keys.
      timeout_seconds: Deadline of the step; the job is deleted when it passes (0 or
        None: no deadline).
      queue_name: Kueue LocalQueue of the job (label `kueue.x-k8s.io/queue-name`).
      timeout_from: `creation` or `admission` (by Kueue): when `timeout_seconds` starts.
      run_id: The KFP run id; with `task_name` it names the job deterministically.
      task_name: The KFP task name.
      task: What the pipeline author set on the KFP task (its `dsl.TaskConfig`), for the
        replicas; these settings win over it (`task_settings`).
    """

    image: Optional[str] = None
    namespace: Optional[str] = None
    work_uri: Optional[str] = None
    pvc_name: Optional[str] = None
    pvc_mount_path: str = PVC_MOUNT_PATH
    gpus_per_worker: int = 0
    cpu_per_worker: Optional[str] = None
    memory_per_worker: Optional[str] = None
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    service_account: Optional[str] = None
    object_store_secret: Optional[str] = None
    timeout_seconds: Optional[float] = None
    queue_name: Optional[str] = None
    timeout_from: str = FROM_CREATION
    run_id: Optional[str] = None
    task_name: Optional[str] = None
    task: TaskSettings = TaskSettings()

    def __post_init__(self):
        require(self.timeout_from in TIMEOUT_FROM, f"timeout_from {self.timeout_from!r} is not "
                f"valid; valid: {list(TIMEOUT_FROM)}")

    def validate(self) -> None:
        """Checks every setting that needs no cluster: names, image, quantities, labels, paths.

        Runs with the other parameters' checks, before anything is staged or
        created, so a bad value is named before the namespace or the work
        location is looked up.

        Raises:
          InvalidInputError: Naming the first bad value and what would be valid.
        """
        from kfdist.components.train_distributed.kubernetes.build import job_validation as check
        from kfdist.components.train_distributed.kubernetes.build.job_parts import (
            PvcMount, check_labels)
        from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import (
            QUEUE_NAME_LABEL)

        if self.image is not None:
            check.check_image(self.image)
        if self.namespace is not None:
            check.check_namespace(self.namespace)
        check.check_object_name("service_account", self.service_account)
        check.check_object_name("object_store_secret", self.object_store_secret)
        self.own_worker_resources().validate("Worker resources")
        check_labels("node_selector", self.node_selector)
        if self.queue_name is not None:
            check_labels("labels", {QUEUE_NAME_LABEL: self.queue_name})
        if self.pvc_name is not None:
            PvcMount(claim_name=self.pvc_name, mount_path=self.pvc_mount_path).validate()
        require(self.work_uri is None or storage.is_remote(self.work_uri)
                or self.work_uri.startswith("/"),
                f"work_uri {self.work_uri!r} is neither a gs://, s3:// or minio:// prefix nor an "
                "absolute path on the PVC (pvc_name)")
        require(self.timeout_seconds is None or self.timeout_seconds >= 0,
                f"timeout_seconds must be >= 0 (0: no deadline), got {self.timeout_seconds!r}")

    def image_for(self, strategy: str) -> str:
        """The replicas' image: the option, else kfdist's image for `strategy` (from the registry
        and tag in KFDIST_IMAGE_REGISTRY/KFDIST_IMAGE_TAG where a pipeline was compiled so)."""
        if self.image:
            return self.image
        return kfdist_image("horovod" if strategy == HOROVOD else "runtime")

    def own_worker_resources(self) -> Resources:
        """Each worker's resources by these parameters: CPU and memory requested at their limits."""
        return Resources(cpu=self.cpu_per_worker, memory=self.memory_per_worker,
                         cpu_limit=self.cpu_per_worker, memory_limit=self.memory_per_worker,
                         gpus=self.gpus_per_worker)

    def worker_resources(self) -> Resources:
        """Each worker's resources: these parameters', the KFP task's where they set none."""
        return self.task.resources_under(self.own_worker_resources())

    def replica_node_selector(self) -> Dict[str, str]:
        """Every replica's node selector: the KFP task's labels and `node_selector`'s."""
        return self.task.node_selector_under(self.node_selector)
