"""The operators' Go modules, as `modules/` pins them, and what the bed installs from them: their
CRDs and their webhook configurations (pointed at the operators' processes on this host).

Each module's files come from the Go module cache (`go mod download`: `build.sh` fetched them
when it built the binary).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Callable, Dict, List, Optional

import yaml

from cluster import processes

MODULES = Path(__file__).resolve().parent / "modules"


@dataclasses.dataclass(frozen=True)
class Module:
    """An operator's Go module, as `modules/<directory>/go.mod` pins it."""

    directory: str
    path: str

    @property
    def version(self) -> str:
        for line in (MODULES / self.directory / "go.mod").read_text().splitlines():
            words = line.split()
            for word, following in zip(words, words[1:]):
                if word == self.path and following.startswith("v"):
                    return following
        raise processes.StartFailed(f"{self.directory}/go.mod does not require {self.path}")

    def source(self) -> Path:
        """The module's files in the Go module cache (downloaded when missing; asked once)."""
        return module_source(self.path, self.version)


@functools.lru_cache(maxsize=None)
def module_source(path: str, version: str) -> Path:
    """The files of Go module `path` at `version`, from the module cache (downloaded when
    missing; asked once)."""
    found = subprocess.run(["go", "mod", "download", "-json", f"{path}@{version}"],
                           cwd=MODULES, capture_output=True, text=True,
                           env={**os.environ, "PATH": os.environ["PATH"] + ":/usr/local/go/bin"})
    if found.returncode != 0:
        raise processes.StartFailed(f"go mod download {path}@{version}: "
                                    f"{found.stdout}{found.stderr}")
    return Path(json.loads(found.stdout)["Dir"])


TRAINING_OPERATOR = Module("training-operator", "github.com/kubeflow/training-operator")
MPI_OPERATOR = Module("mpi-operator", "github.com/kubeflow/mpi-operator")
TRAINER = Module("trainer", "github.com/kubeflow/trainer/v2")
JOBSET = Module("jobset", "sigs.k8s.io/jobset")
KUEUE = Module("kueue", "sigs.k8s.io/kueue")


def _documents(path: Path) -> List[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def crds() -> List[Path]:
    """Every CRD file the bed installs (the MPIJob CRD is the MPI Operator's v2beta1 one)."""
    training = TRAINING_OPERATOR.source() / "manifests" / "base" / "crds"
    trainer = TRAINER.source() / "manifests" / "base" / "crds"
    kueue = KUEUE.source() / "config" / "components" / "crd" / "bases"
    return [training / "kubeflow.org_tfjobs.yaml", training / "kubeflow.org_pytorchjobs.yaml",
            MPI_OPERATOR.source() / "manifests" / "base" / "kubeflow.org_mpijobs.yaml",
            JOBSET.source() / "config" / "components" / "crd" / "bases" /
            "jobset.x-k8s.io_jobsets.yaml",
            *sorted(trainer.glob("trainer.kubeflow.org_*.yaml")),
            *sorted(kueue.glob("kueue.x-k8s.io_*.yaml"))]


def webhook_configurations(source: Path, port: int, ca_pem: bytes, names: Dict[str, str],
                           keep: Callable[[str], bool],
                           object_selectors: Optional[Dict[str, dict]] = None) -> List[dict]:
    """An operator's webhook configurations, pointed at 127.0.0.1:`port`.

    Args:
      source: Its `manifests.yaml` (kustomize base: service references, placeholder names).
      port: Its webhook server's port.
      ca_pem: The CA that signed its serving certificate.
      names: The configurations' names as its release names them, by kind.
      keep: Which webhooks to keep, by path (those of the job kinds the bed runs).
      object_selectors: An objectSelector its release adds, by path fragment.
    """
    bundle = base64.b64encode(ca_pem).decode()
    configurations = []
    for document in _documents(source):
        kind = document["kind"]
        webhooks = []
        for webhook in document.get("webhooks", []):
            path = webhook["clientConfig"]["service"]["path"]
            if not keep(path):
                continue
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            for fragment, selector in (object_selectors or {}).items():
                if fragment in path:
                    webhook["objectSelector"] = selector
            webhooks.append(webhook)
        if webhooks:
            document["metadata"] = {"name": names[kind]}
            document["webhooks"] = webhooks
            configurations.append(document)
    return configurations


def jobset_webhooks(module: Module, port: int, ca: bytes) -> List[dict]:
    """JobSet's webhook configurations as its release names and scopes them."""
    return webhook_configurations(
        module.source() / "config" / "components" / "webhook" / "manifests.yaml", port, ca,
        {"MutatingWebhookConfiguration": "jobset-mutating-webhook-configuration",
         "ValidatingWebhookConfiguration": "jobset-validating-webhook-configuration"},
        keep=lambda path: True,
        object_selectors={"-v1-pod": {"matchExpressions": [
            {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}})


def webhooks(ports: Dict[str, tuple], ca: bytes) -> List[dict]:
    """Every operator's webhook configurations, as their releases name and scope them."""
    kueue_kinds = ("job", "jobset", "mpijob", "tfjob", "pytorchjob", "trainjob", "clusterqueue",
                   "resourceflavor", "workload", "cohort", "localqueue")
    return [
        *webhook_configurations(
            TRAINING_OPERATOR.source() / "manifests" / "base" / "webhook" / "manifests.yaml",
            ports["training-operator"][0], ca,
            {"ValidatingWebhookConfiguration": "validator.training-operator.kubeflow.org"},
            keep=lambda path: path.endswith(("-tfjob", "-pytorchjob"))),
        *jobset_webhooks(JOBSET, ports["jobset"][0], ca),
        *webhook_configurations(
            TRAINER.source() / "manifests" / "base" / "webhook" / "manifests.yaml",
            ports["trainer"][0], ca,
            {"MutatingWebhookConfiguration": "defaulter.trainer.kubeflow.org",
             "ValidatingWebhookConfiguration": "validator.trainer.kubeflow.org"},
            keep=lambda path: True),
        *webhook_configurations(
            KUEUE.source() / "config" / "components" / "webhook" / "manifests.yaml",
            ports["kueue"][0], ca,
            {"MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
             "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration"},
            keep=lambda path: path.rsplit("-", 1)[-1] in kueue_kinds),
    ]
