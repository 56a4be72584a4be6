"""Hand-written rendered jobs: a minimal valid TFJob (Chief + Worker) and MPIJob (Launcher + Worker)."""

from __future__ import annotations

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, JOB_ROLE_LABEL, MPIJOB_V2BETA1, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL,
    TFJOB_V1, RenderedJob)

IMAGE = "ghcr.io/kfdist/kfdist-trainer:0.1.0"


def _replica(container: str, command, replicas: int = 1, restart_policy: str = "Never"):
    return {"replicas": replicas, "restartPolicy": restart_policy,
            "template": {"spec": {"containers": [
                {"name": container, "image": IMAGE, "command": command}]}}}


def sample_tfjob(name: str = "run-1-train", namespace: str = "kubeflow", workers: int = 1,
                 steps: int = 100) -> RenderedJob:
    """A TFJob with one Chief and `workers` Workers; the chief's log is streamed."""
    command = ["python", "-m", "kfdist.train", f"--steps={steps}"]
    body = {"apiVersion": TFJOB_V1.api_version, "kind": TFJOB_V1.kind,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "kfdist"}},
            "spec": {"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
                     "tfReplicaSpecs": {"Chief": _replica("tensorflow", command),
                                        "Worker": _replica("tensorflow", command, workers)}}}
    selector = {JOB_NAME_LABEL: name, REPLICA_TYPE_LABEL: "chief", REPLICA_INDEX_LABEL: "0"}
    return RenderedJob(TFJOB_V1, name, namespace, body, selector)


def sample_mpijob(name: str = "run-1-horovod", namespace: str = "kubeflow",
                  workers: int = 2) -> RenderedJob:
    """An MPIJob v2beta1 with a Launcher and `workers` Workers; the launcher's log is streamed."""
    launcher = ["mpirun", "-np", str(workers), "python", "-m", "kfdist.train"]
    body = {"apiVersion": MPIJOB_V2BETA1.api_version, "kind": MPIJOB_V2BETA1.kind,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "kfdist"}},
            "spec": {"slotsPerWorker": 1, "launcherCreationPolicy": "WaitForWorkersReady",
                     "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
                     "mpiReplicaSpecs": {"Launcher": _replica("launcher", launcher),
                                         "Worker": _replica("worker", ["/usr/sbin/sshd", "-De"],
                                                            workers)}}}
    selector = {JOB_NAME_LABEL: name, JOB_ROLE_LABEL: "launcher"}
    return RenderedJob(MPIJOB_V2BETA1, name, namespace, body, selector)
