"""A test's namespace on a bed: kfdist's pipeline-runner ServiceAccount and Role (manifests/base)
bound in it, a kubeconfig with that ServiceAccount's token (what the training step runs with on a
cluster), and the reads, claims and kills the tests make in it."""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
from pathlib import Path

from cluster import api_reads, control_plane, node
from cluster import bed as test_bed
from cluster.bed import REPO

RUNNER = "kfdist-pipeline-runner"
_numbers = itertools.count(1)
#: Part of each namespace's name: the pytest-xdist worker's id, as workers share the genuine
#: node's bed (`t1-gw0`).
_WORKER = f"-{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""


class Namespace:
    """A test's namespace on the bed, with the pipeline runner's RBAC and token kubeconfig."""

    def __init__(self, bed: test_bed.Bed, name: str, kubeconfig: Path):
        self.bed, self.name, self.kubeconfig = bed, name, kubeconfig

    def claim_dir(self, claim: str) -> Path:
        """The node's directory for the claim `claim` of this namespace (the provisioner's
        `volumes/<namespace>/<claim>`)."""
        return node.layout_of(self.bed.root).volumes / self.name / claim

    def claim_path(self, claim: str) -> Path:
        """Creates a PersistentVolumeClaim `claim` in this namespace and returns the node's
        directory for it (its provisioner binds the claim to that directory when the first pod
        uses it)."""
        path = self.claim_dir(claim)
        self.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim}, "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}))
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)
        return path

    def kubectl(self, *args: str, stdin: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess:
        """kubectl as the administrator, in this namespace."""
        return self.bed.kubectl_run(f"--namespace={self.name}", *args, stdin=stdin, check=check)

    def get(self, kind: str, name: str = ""):
        """An object (or, without `name`, the list's items) as JSON: what `kubectl get -o json`
        prints, read without a kubectl process (`api_reads`; a test polls this often)."""
        found = api_reads.get(self.bed.layout, kind, self.name, name)
        return found if name else found["items"]

    def api_calls(self, account: str = RUNNER) -> list:
        """The API server's audit entries for requests by `account` of this namespace."""
        return control_plane.audit_events(self.bed.layout,
                                          f"system:serviceaccount:{self.name}:{account}")

    def kill_containers(self, pod_matches) -> list:
        """SIGKILLs the running containers of the pods `pod_matches` accepts, as the node would
        see a crash; returns their names (none when no such container runs yet)."""
        running = [(f"{pod['metadata']['name']}/{c['name']}", c["containerID"])
                   for pod in self.get("pod") if pod_matches(pod)
                   for c in pod["status"].get("containerStatuses", ())
                   if "running" in c.get("state", {})]
        for _, container_id in running:
            node.kill_container(self.bed, container_id)
        return [name for name, _ in running]


@functools.lru_cache(maxsize=None)
def _rendered_base(kubectl: str) -> str:
    return subprocess.run([kubectl, "kustomize", str(REPO / "manifests" / "base")], check=True,
                          capture_output=True, text=True, timeout=120).stdout


def _runner_rbac(bed: test_bed.Bed) -> str:
    """manifests/base as `kubectl kustomize` renders it (once per test process)."""
    return _rendered_base(bed.kubectl)


def make_namespace(bed: test_bed.Bed, name: str, root: Path) -> Namespace:
    """Creates `name` with manifests/base's RBAC in it and a kubeconfig of its ServiceAccount."""
    bed.kubectl_run("create", "namespace", name)
    bed.kubectl_run("apply", f"--namespace={name}", "-f", "-",
                    stdin=_runner_rbac(bed).replace("namespace: default", f"namespace: {name}"))
    token = bed.kubectl_run("create", "token", RUNNER, f"--namespace={name}",
                            "--duration=2h").stdout.strip()
    kubeconfig = root / f"{name}.kubeconfig"
    kubeconfig.write_text(control_plane.kubeconfig(
        bed.layout.api_url, bed.layout.pki / "ca.crt", {"token": token}, RUNNER, name))
    return Namespace(bed, name, kubeconfig)


def runner_namespace(bed: test_bed.Bed, root: Path, monkeypatch) -> Namespace:
    """A fresh namespace of `bed` (`make_namespace`), `KUBECONFIG` its pipeline runner's, none of
    a pod's variables set."""
    for variable in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KFP_POD_NAMESPACE",
                     "KFP_POD_NAME", "KFP_POD_UID", "TF_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    namespace = make_namespace(bed, f"t{next(_numbers)}{_WORKER}", root)
    monkeypatch.setenv("KUBECONFIG", str(namespace.kubeconfig))
    return namespace
