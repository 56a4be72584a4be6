"""docs/guide/cluster.md's cluster blocks, run as written on the genuine node: a staged Horovod
render piped into `kubectl apply`, and the example jobs of `manifests/examples-cpu` after `kfdist
render --stage` wrote their descriptions; the real MPI Operator and Training Operator train all
three.

The commands run in bash as a person would (kubectl as the cluster's administrator), in a
directory holding the sample run's dataset at `kfdist-run/dataset` and the repository's
`manifests`. The claim `kfdist-work` of namespace `team-a` (the examples' own, ReadWriteMany)
exists, bound to a volume the administrator made for it: the node's directory, which is at
/mnt/kfdist here, as in a pod that mounts it there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.fixture import wait_for
from cluster.namespaces import make_namespace
from cluster.node_addons import STORAGE_CLASS
from cluster.node_config import NODE_NAME
from containers.test_run_on_the_bed import _conditions
from doc_shell_blocks import ROOT, blocks_run_by

pytestmark = pytest.mark.slow
#: The staged render piped into kubectl; the example jobs.
RENDER_AND_APPLY, EXAMPLE_JOBS = blocks_run_by(__file__)
NAMESPACE, CLAIM = "team-a", "kfdist-work"
#: The three jobs' work locations on the claim (each writes its model there).
WORK_DIRS = ("jobs/mnist", "kfdist-mnist-tfjob", "kfdist-mnist-horovod")


def _shared_volume(name: str, path: Path) -> dict:
    """A PersistentVolume for the claim `team-a/kfdist-work` alone (`claimRef`), as an
    administrator makes one of a shared file system: here the node's directory `path`, a `local`
    volume (its kubelet plugin gives the pods' fsGroup the files, as the provisioner's do)."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
        "claimRef": {"namespace": NAMESPACE, "name": CLAIM},
        "local": {"path": str(path)},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{
            "key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}]}]}}}}


@pytest.fixture
def team_a(node_bed, host_mount, tmp_path, monkeypatch):
    """Namespace `team-a` with the claim `kfdist-work` (manifests/examples' own) and the volume
    for it, at /mnt/kfdist; KUBECONFIG the administrator's (a person applying example jobs)."""
    namespace = make_namespace(node_bed, NAMESPACE, tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(node_bed.kubeconfig))
    claim = namespace.claim_dir(CLAIM)
    claim.mkdir(parents=True)
    volume = f"{NAMESPACE}-{CLAIM}"
    node_bed.kubectl_run("create", "-f", "-", stdin=json.dumps(_shared_volume(volume, claim)))
    namespace.kubectl("create", "-f", str(Path(ROOT) / "manifests" / "examples" /
                                          "work-pvc.yaml"))
    try:
        with host_mount(claim):
            yield namespace
    finally:
        node_bed.kubectl_run("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s",
                             check=False)
        node_bed.kubectl_run("delete", "persistentvolume", volume, "--wait=false", check=False)


def _run_block(block, cwd: Path) -> str:
    """The block's commands in bash (kfdist and kubectl from this environment), stopping at the
    first failure; their output."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{block}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_cluster_guides_render_apply_and_example_jobs_run_as_written(
        team_a, kfdist_images, digits_dataset, tmp_path):
    cwd = tmp_path / "shell"
    shutil.copytree(digits_dataset, cwd / "kfdist-run" / "dataset")
    (cwd / "manifests").symlink_to(Path(ROOT) / "manifests")

    applied = _run_block(RENDER_AND_APPLY, cwd)
    assert applied.startswith("mpijob.kubeflow.org/kfdist-train-distributed-"), applied
    [rendered] = team_a.get("mpijob")
    assert rendered["spec"]["slotsPerWorker"] == 2
    assert rendered["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2

    # Once its pods are done with the claim: the kubelet gives a volume's files to the pods'
    # fsGroup when no other pod has it mounted, and the next block's descriptions are written
    # as this user (root), not from a pod.
    wait_for(lambda: all(("Succeeded", "MPIJobSucceeded") in _conditions(job)
                         for job in team_a.get("mpijob")), 600, "the rendered job to succeed")
    wait_for(lambda: all(p["status"].get("phase") in ("Succeeded", "Failed")
                         for p in team_a.get("pod")), 120, "its pods to end")
    applied = _run_block(EXAMPLE_JOBS, cwd)
    assert "tfjob.kubeflow.org/kfdist-mnist-tfjob serverside-applied" in applied, applied
    assert "mpijob.kubeflow.org/kfdist-mnist-horovod serverside-applied" in applied, applied
    tfjob = team_a.get("tfjob", "kfdist-mnist-tfjob")
    for replica in ("Chief", "Worker"):
        [container] = tfjob["spec"]["tfReplicaSpecs"][replica]["template"]["spec"]["containers"]
        assert container["image"] == kfdist_images["runtime"]
        assert "nvidia.com/gpu" not in container["resources"].get("limits", {})

    def all_succeeded() -> bool:
        tfjob = team_a.get("tfjob", "kfdist-mnist-tfjob")
        return (all(("Succeeded", "MPIJobSucceeded") in _conditions(job)
                    for job in team_a.get("mpijob"))
                and ("Succeeded", "TFJobSucceeded") in _conditions(tfjob))

    wait_for(all_succeeded, seconds=600, what="the three jobs to succeed")
    claim = team_a.claim_dir(CLAIM)
    for where in WORK_DIRS:
        assert (claim / where / "model" / "saved_model" / "saved_model.pb").is_file(), where
