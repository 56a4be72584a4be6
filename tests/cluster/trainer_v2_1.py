"""Kubeflow Trainer v2.1 with the JobSet release it requires (v0.10), for the bed that stands for
a cluster still on Trainer v2.1, whose TrainJobs carry pod settings in `podTemplateOverrides`.

Started on the genuine node the way `operators.py` starts Trainer v2.3 and JobSet v0.12, less what
v2.1 does not have (no status server, no feature gates, no defaulting webhook), and nothing else:
no Training Operator, MPI Operator or Kueue.
"""

from __future__ import annotations

import yaml

from cluster import crds, processes
from cluster.operator_sources import Module, jobset_webhooks, webhook_configurations
from cluster.operators import READY_TIMEOUT_S, OperatorDirs, _config, start_jobset

TRAINER = Module("trainer-v2.1", "github.com/kubeflow/trainer/v2")
JOBSET = Module("jobset-v0.10", "sigs.k8s.io/jobset")
#: The binaries this bed runs besides etcd, the API server and the controller manager.
BINARIES = ("jobset-v0.10", "trainer-controller-manager-v2.1")
NAMESPACES = ("kubeflow-system", "jobset-system")


def start(bed, procs: processes.Processes) -> None:
    """Installs JobSet's and Trainer's CRDs, starts both controllers, then their webhooks."""
    root, pki, binaries = bed.root, bed.layout.pki, bed.binaries
    for namespace in NAMESPACES:
        bed.kubectl_run("create", "namespace", namespace)
    files = [JOBSET.source() / "config" / "components" / "crd" / "bases" /
             "jobset.x-k8s.io_jobsets.yaml",
             *sorted((TRAINER.source() / "manifests" / "base" / "crds").glob(
                 "trainer.kubeflow.org_*.yaml"))]
    crds.install(bed, files)

    configs = root / "operators"
    configs.mkdir(exist_ok=True)
    ports = {name: (processes.free_port(), processes.free_port()) for name in ("trainer", "jobset")}
    dirs = OperatorDirs(root, pki)
    kubeconfig = str(bed.kubeconfig)
    start_jobset(procs, binaries["jobset-v0.10"], kubeconfig, configs / "jobset.yaml",
                 ports["jobset"], dirs)
    webhook, health = ports["trainer"]
    # Its webhook server takes the certificate from TMPDIR's k8s-webhook-server/serving-certs.
    procs.start("trainer", [binaries["trainer-controller-manager-v2.1"],
                            f"--kubeconfig={kubeconfig}", "--config=" + str(_config(
                                configs / "trainer.yaml", {
                                    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                                    "kind": "Configuration",
                                    "webhook": {"port": webhook, "host": "127.0.0.1"},
                                    "metrics": {"bindAddress": "0", "secureServing": False},
                                    "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
                                    "certManagement": {"enable": False}}))],
                env=dirs.own_tmp("trainer"))
    for name in ("jobset", "trainer"):
        procs.wait_until(name, lambda h=ports[name][1]: processes.http_ok(
            f"http://127.0.0.1:{h}/readyz"), READY_TIMEOUT_S)

    ca = (pki / "ca.crt").read_bytes()
    documents = [
        *jobset_webhooks(JOBSET, ports["jobset"][0], ca),
        *webhook_configurations(
            TRAINER.source() / "manifests" / "base" / "webhook" / "manifests.yaml",
            ports["trainer"][0], ca,
            {"ValidatingWebhookConfiguration": "validator.trainer.kubeflow.org"},
            keep=lambda path: True)]
    webhook_file = configs / "webhooks.yaml"
    webhook_file.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    bed.kubectl_run("apply", "--server-side", f"--filename={webhook_file}")
