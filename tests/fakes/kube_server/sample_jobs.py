"""Hand-written rendered jobs: a minimal valid TFJob (Chief + Worker), MPIJob (Launcher + Worker)
and TrainJob (on kfdist's TensorFlow runtime, tiny node programs)."""

from __future__ import annotations

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    COMPLETION_INDEX_LABEL, JOB_NAME_LABEL, JOB_ROLE_LABEL, JOBSET_NAME_LABEL, MPIJOB_V2BETA1,
    REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, REPLICATED_JOB_LABEL, TFJOB_V1, TRAINJOB_V1ALPHA1,
    RenderedJob)

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


#: A TrainJob node's program: node 0 prints two epochs and a saved model, each node sleeps
#: SLEEP_<index> seconds (default 0.3) and exits with the n-th of EXIT_CODE_<index> (a comma list,
#: the last repeating; default 0), n counted in RUNS_DIR when it is set.
TRAINJOB_NODE = (
    "import os, sys, time; i = os.environ['JOB_COMPLETION_INDEX'];"
    "say = lambda s: print(s, flush=True); pause = float(os.environ.get('SLEEP_' + i, '0.3'));"
    "runs = os.path.join(os.environ.get('RUNS_DIR', ''), 'runs-' + i);"
    "n = int(open(runs).read()) if os.environ.get('RUNS_DIR') and os.path.exists(runs) else 0;"
    "open(runs, 'w').write(str(n + 1)) if os.environ.get('RUNS_DIR') else None;"
    "say('epoch 1/2 loss=0.91') if i == '0' else None; time.sleep(pause);"
    "say('epoch 2/2 loss=0.42') if i == '0' else None;"
    "say('saved model') if i == '0' else say('node ' + i + ' done');"
    "codes = os.environ.get('EXIT_CODE_' + i, '0').split(',');"
    "sys.exit(int(codes[min(n, len(codes) - 1)]))")


def sample_trainjob(name: str = "run-1-trainjob", namespace: str = "kubeflow", nodes: int = 2,
                    runtime: str = "kfdist-tensorflow", **env) -> RenderedJob:
    """A TrainJob of `nodes` pods on kfdist's TensorFlow runtime running `TRAINJOB_NODE`."""
    body = {"apiVersion": TRAINJOB_V1ALPHA1.api_version, "kind": TRAINJOB_V1ALPHA1.kind,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "kfdist"}},
            "spec": {"runtimeRef": {"apiGroup": TRAINJOB_V1ALPHA1.group,
                                    "kind": "ClusterTrainingRuntime", "name": runtime},
                     "trainer": {"command": ["python", "-c", TRAINJOB_NODE], "numNodes": nodes,
                                 "env": [{"name": k, "value": str(v)} for k, v in env.items()]}}}
    selector = {JOBSET_NAME_LABEL: name, REPLICATED_JOB_LABEL: "node", COMPLETION_INDEX_LABEL: "0"}
    return RenderedJob(TRAINJOB_V1ALPHA1, name, namespace, body, selector)
