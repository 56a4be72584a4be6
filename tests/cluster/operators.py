"""The operators' own controllers as processes, with their own CRDs and webhook configurations.

Each operator's CRDs and webhooks come from its Go module at the version `modules/` pins
(`operator_sources.py`). Webhook configurations point at
`https://127.0.0.1:PORT/<path>` with the bed's CA (as envtest does); each operator serves the
bed's certificate from a directory of its own (`TMPDIR`), and the Training Operator, whose
cert-controller cannot be turned off, finds its Secret made in advance with the same certificate.

What the operators run with differs from their releases' deployments only where a process on one
machine must: ports, kubeconfigs, certificates, and

* the Training Operator's PyTorch init container runs in the Debian base image the bed has
  (`containers/build.sh` builds it) with `getent hosts` in place of `nslookup` (no alpine image);
* Kueue runs with VisibilityOnDemand off (its aggregated API server needs in-cluster networking);
* Trainer runs with its TrainJobStatus gate on: its status server finds the API server's token
  issuer from a ServiceAccount token at the in-pod path, which only Trainer's process sees (its own
  mount namespace); the pods reach it at its Service's name (`HOST_SERVICES`), a Service whose
  endpoint is the host on the node's bridge (`operator_pods.host_service`);
* the MPI Operator runs as its release's Deployment, a pod of the node (`operator_pods`).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from types import MappingProxyType
from typing import Dict, List, Mapping, Optional

import yaml

from cluster import crds as bed_crds
from cluster import operator_pods, processes
from cluster import operator_sources as sources

HERE = Path(__file__).resolve().parent
#: Where the Training Operator's cert-controller looks for a mounted certificate (fixed in its code).
FIXED_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
#: Where Kueue loads its metrics certificate from whatever its configuration says (fixed).
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
#: The image of the Training Operator's PyTorch init container (the bed's Debian base).
INIT_IMAGE = "docker.io/library/debian:12.15-slim"
READY_TIMEOUT_S = 120.0
#: Trainer v2.3 with TrainJobStatus on would end only after its manager's 30 s graceful-shutdown
#: timeout (its status server's `Start` waits on a channel nothing closes once it has shut down):
#: after this many seconds the bed sends the second SIGTERM that ends a controller at once.
TRAINER_SECOND_SIGTERM_AFTER_S = 3.0
#: The namespaces the operators keep their own objects in (as their releases deploy them).
NAMESPACES = ("kubeflow", "kubeflow-system", "jobset-system", "kueue-system", "mpi-operator")
#: Trainer's Service and namespace (its defaults), where its pods post their progress.
TRAINER_SERVICE = ("kubeflow-system", "kubeflow-trainer-controller-manager")
#: Services of operators that pods call (`(namespace, name)`): on a cluster, Services in front
#: of the operators' pods; here the operators are processes on the host.
HOST_SERVICES = (TRAINER_SERVICE,)
#: Where a pod finds its ServiceAccount token (Trainer's status server reads its issuer there).
IN_POD_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def service_host(service) -> str:
    """A Service's name as pods resolve it (`<name>.<namespace>.svc`)."""
    namespace, name = service
    return f"{name}.{namespace}.svc"


def _write_certs(directory: Path, pki: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for source, target in (("serving.crt", "tls.crt"), ("serving.key", "tls.key"),
                           ("ca.crt", "ca.crt")):
        (directory / target).write_bytes((pki / source).read_bytes())
    return directory


def in_own_mounts(token: Optional[Path], path: str = IN_POD_TOKEN,
                       binds: Mapping[Path, Path] = MappingProxyType({})) -> List[str]:
    """The argv prefix that runs a command in its own mount namespace, where `path` (under /run)
    holds `token` (on a tmpfs over /run: nothing of the host's /run is changed or seen), and each
    fixed path of `binds` shows the bed's own directory given for it (`{fixed: the bed's}`), so
    that two beds' operators never read each other's certificates there."""
    steps = [f"mkdir -p {shlex.quote(str(fixed))} && mount --bind {shlex.quote(str(own))} "
             f"{shlex.quote(str(fixed))}" for fixed, own in binds.items()]
    if token is not None:
        steps.append(f"mount -t tmpfs tmpfs /run && mkdir -p {os.path.dirname(path)} && "
                     f"cp {shlex.quote(str(token))} {path}")
    script = " && ".join([*steps, 'exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]


def _config(path: Path, document: dict) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class OperatorDirs:
    """Each operator's own TMPDIR under the bed, holding the bed's serving certificate where
    controller-runtime's webhook server looks (`k8s-webhook-server/serving-certs`)."""

    def __init__(self, root: Path, pki: Path):
        self.root, self.pki = root, pki
        self.base_env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "TMPDIR")}

    def cert_dir(self, name: str) -> Path:
        return _write_certs(self.root / "tmp" / name / "k8s-webhook-server" / "serving-certs",
                            self.pki)

    def own_tmp(self, name: str) -> Dict[str, str]:
        """The environment of operator `name`: the bed's, less KUBECONFIG, with its TMPDIR."""
        self.cert_dir(name)
        return {**self.base_env, "TMPDIR": str(self.root / "tmp" / name)}


def start_jobset(procs: processes.Processes, binary: str, kubeconfig: str, config: Path,
                 ports: tuple, dirs: OperatorDirs) -> None:
    """JobSet's controller with its webhook on 127.0.0.1 (`ports`: webhook, health)."""
    webhook, health = ports
    procs.start("jobset", [binary, f"--kubeconfig={kubeconfig}", "--config=" + str(
        _config(config, {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "webhook": {"port": webhook, "host": "127.0.0.1",
                        "certDir": str(dirs.cert_dir("jobset"))},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "internalCertManagement": {"enable": False}}))], env=dirs.own_tmp("jobset"))


def start_operators(bed, procs: processes.Processes, mpi_operator_image: str,
                    host_ip: str) -> None:
    """Installs the operators' CRDs, starts each operator, then installs their webhooks.

    Args:
      bed: The bed (`bed.Bed`).
      procs: Its processes.
      mpi_operator_image: The image the MPI Operator runs from as its release's Deployment
        (`operator_pods`).
      host_ip: The host's address on the node's bridge: the Services of `HOST_SERVICES` lead
        there (`operator_pods.host_service`).
    """
    root, pki, binaries = bed.root, bed.layout.pki, bed.binaries
    bed.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
         for namespace in NAMESPACES]))  # KFP's bed has made `kubeflow` already
    bed_crds.install(bed, sources.crds())

    # The Training Operator's cert-controller takes the Secret as it is when it is valid.
    bed.kubectl_run("create", "secret", "generic", "training-operator-webhook-cert",
                    "--namespace=kubeflow", f"--from-file=ca.crt={pki / 'ca.crt'}",
                    f"--from-file=ca.key={pki / 'ca.key'}",
                    f"--from-file=tls.crt={pki / 'serving.crt'}",
                    f"--from-file=tls.key={pki / 'serving.key'}")
    # What the operators read at fixed paths, the bed's own in their mount namespaces.
    fixed_certs = {FIXED_CERT_DIR: _write_certs(root / "tmp" / "fixed-serving-certs", pki),
                   KUEUE_METRICS_CERT_DIR: _write_certs(root / "tmp" / "kueue-metrics-certs",
                                                        pki)}
    # Trainer copies this Secret's CA into each TrainJob's ConfigMap, for its pods' status posts.
    namespace, service = TRAINER_SERVICE
    bed.kubectl_run("create", "secret", "generic", "kubeflow-trainer-webhook-cert",
                    f"--namespace={namespace}", f"--from-file=ca.crt={pki / 'ca.crt'}",
                    f"--from-file=tls.crt={pki / 'serving.crt'}",
                    f"--from-file=tls.key={pki / 'serving.key'}")
    bed.kubectl_run("create", "serviceaccount", service, f"--namespace={namespace}")
    trainer_token = root / "tmp" / "trainer-serviceaccount-token"
    trainer_token.parent.mkdir(parents=True, exist_ok=True)
    trainer_token.write_text(bed.kubectl_run("create", "token", service,
                                             f"--namespace={namespace}",
                                             "--duration=48h").stdout.strip())
    configs = root / "operators"
    configs.mkdir(exist_ok=True)
    ports = {name: (processes.free_port(), processes.free_port()) for name in
             ("training-operator", "trainer", "jobset", "kueue")}
    status_port = processes.free_port()
    operator_pods.host_service(bed, TRAINER_SERVICE, status_port, host_ip)
    dirs = OperatorDirs(root, pki)
    cert_dir, own_tmp = dirs.cert_dir, dirs.own_tmp

    kubeconfig = str(bed.kubeconfig)
    webhook, health = ports["training-operator"]
    template = configs / "pytorch-init-container.yaml"
    template.write_text(_pytorch_init_template(sources.TRAINING_OPERATOR.source()))
    procs.start("training-operator", [
        *in_own_mounts(None, binds=fixed_certs), binaries["training-operator"],
        f"--kubeconfig={kubeconfig}", "--enable-scheme=tfjob",
        "--enable-scheme=pytorchjob", "--leader-elect=false", "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{health}", f"--webhook-server-port={webhook}",
        f"--pytorch-init-container-image={INIT_IMAGE}",
        f"--pytorch-init-container-template-file={template}"],
        env={**own_tmp("training-operator"), "MY_POD_NAMESPACE": "kubeflow"})
    operator_pods.deploy_mpi_operator(bed, sources.MPI_OPERATOR.source(), mpi_operator_image)
    start_jobset(procs, binaries["jobset"], kubeconfig, configs / "jobset.yaml", ports["jobset"],
                 dirs)
    webhook, health = ports["trainer"]
    procs.start("trainer", [*in_own_mounts(trainer_token, binds=fixed_certs),
                            binaries["trainer-controller-manager"], f"--kubeconfig={kubeconfig}",
                            "--config=" + str(_config(configs / "trainer.yaml", {
                                "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                                "kind": "Configuration",
                                "webhook": {"port": webhook, "host": "127.0.0.1"},
                                "metrics": {"bindAddress": "0", "secureServing": False},
                                "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
                                "certManagement": {"enable": False},
                                "statusServer": {"port": status_port},
                                "featureGates": {"TrainJobStatus": True}}))],
                env=own_tmp("trainer"),
                second_sigterm_after_s=TRAINER_SECOND_SIGTERM_AFTER_S)
    webhook, health = ports["kueue"]
    procs.start("kueue", [*in_own_mounts(None, binds=fixed_certs), binaries["kueue"],
                          f"--kubeconfig={kubeconfig}", "--config=" + str(
        _config(configs / "kueue.yaml", {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system", "manageJobsWithoutQueueName": False,
            "leaderElection": {"leaderElect": False},
            "webhook": {"port": webhook, "host": "127.0.0.1", "certDir": str(cert_dir("kueue"))},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": [
                "batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob",
                "kubeflow.org/mpijob", "kubeflow.org/tfjob", "kubeflow.org/pytorchjob"]},
            "featureGates": {"VisibilityOnDemand": False}}))], env=own_tmp("kueue"))

    for name in ("training-operator", "jobset", "trainer", "kueue"):
        health = ports[name][1]
        procs.wait_until(name, lambda h=health: processes.http_ok(
            f"http://127.0.0.1:{h}/readyz"), READY_TIMEOUT_S)
    operator_pods.wait_for_mpi_operator(bed)  # its pod started while the others did

    ca = (pki / "ca.crt").read_bytes()
    documents = sources.webhooks(ports, ca)
    webhook_file = configs / "webhooks.yaml"
    webhook_file.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    bed.kubectl_run("apply", "--server-side", f"--filename={webhook_file}")
    # Trainer's own runtime for PyTorch (`torch-distributed`), through its validating webhook.
    bed.kubectl_run("apply", "--server-side", "--filename=" + str(
        sources.TRAINER.source() / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"))


def _pytorch_init_template(source: Path) -> str:
    """The Training Operator's own init container, waiting with `getent hosts` (Debian has no
    nslookup) instead of `nslookup`."""
    code = (source / "pkg" / "controller.v1" / "pytorch" / "initcontainer.go").read_text()
    template = code.split("initContainerTemplate = `", 1)[1].split("`", 1)[0]
    if "nslookup" not in template:
        raise processes.StartFailed("the Training Operator's init container no longer uses "
                                    "nslookup: review tests/cluster/operators.py")
    return template.replace("nslookup", "getent hosts")
