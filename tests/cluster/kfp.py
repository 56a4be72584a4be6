"""Kubeflow Pipelines 2.17 on the genuine node's bed: its API server, persistence agent and
scheduled-workflow controller, Argo's workflow controller, MariaDB, MinIO, the MLMD server and the
UI (`kfp_ui`), as host processes of the bed (stopped with it), and the cluster objects KFP's
manifests install.

    layout = start(bed, procs, node_ip, binaries, images)   # once the API answers
    layout.host                                              # what kfp.Client takes

`DIR/kfp-host` holds the API's address, `DIR/kfp-ui` the UI's; `DIR/kfp/` the databases, the
object store's files and the configuration; `DIR/logs/` each process's log.

One stand-in: the MLMD server (`mlmd/server.py`) is a gRPC front over the `ml-metadata` wheel's
store, because MLMD's own server is not published for this platform. The database is MariaDB
(Debian's): KFP 2.17's API server writes MySQL's SQL whichever driver it is given, and MySQL 8 is
not packaged for Debian.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Dict, Mapping

import yaml

from cluster import certs, kfp_config, kfp_ui, node, operator_sources, operators, processes
from cluster import crds as bed_crds
from cluster.kfp_config import KfpLayout

HERE = Path(__file__).resolve().parent
KFP_HOST_FILE = "kfp-host"
RECORD = "kfp.json"
#: The first start creates the database's schema (about a minute on a cold machine).
READY_TIMEOUT_S = 240.0
ARGO = operator_sources.Module("argo-workflows", "github.com/argoproj/argo-workflows/v4")
#: Where the persistence agent reads its token (fixed in its source): given in a mount
#: namespace of its own, on a tmpfs over /run (nothing of the host's /run is changed).
AGENT_TOKEN = "/var/run/secrets/kubeflow/tokens/persistenceagent-sa-token"
MARIADB = ("mariadbd", "mariadb-install-db")


def plan(root: Path, node_ip: str) -> KfpLayout:
    free = processes.free_port
    return KfpLayout(Path(root), node_ip, *(free() for _ in range(7)))


def _mariadb_binaries() -> Dict[str, str]:
    found = {name: shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
             for name in MARIADB}
    missing = [name for name, path in found.items() if not path]
    if missing:
        raise processes.StartFailed(f"{', '.join(missing)} not found: apt-get install "
                                    "mariadb-server (.ci/system-packages.sh installs it)")
    return found


def _start_database(procs: processes.Processes, layout: KfpLayout) -> None:
    mariadb = _mariadb_binaries()
    datadir = layout.dir / "mysql"
    if not datadir.exists():
        result = subprocess.run([mariadb["mariadb-install-db"], "--no-defaults",
                                 f"--datadir={datadir}", "--user=root",
                                 "--auth-root-authentication-method=normal",
                                 "--skip-test-db"], capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise processes.StartFailed(f"mariadb-install-db: {result.stdout}{result.stderr}")
    procs.start("mariadb", kfp_config.mariadb_argv(mariadb["mariadbd"], layout))
    procs.wait_until("mariadb", lambda: processes.port_open(layout.db_port), READY_TIMEOUT_S)


def _start_object_store(procs: processes.Processes, layout: KfpLayout, minio: str) -> None:
    (layout.dir / "minio").mkdir(parents=True, exist_ok=True)
    procs.start("minio", kfp_config.minio_argv(minio, layout),
                env={**os.environ, **kfp_config.minio_env()})
    procs.wait_until("minio", lambda: processes.http_ok(
        f"{layout.s3_endpoint}/minio/health/ready"), READY_TIMEOUT_S)


def _start_mlmd(procs: processes.Processes, layout: KfpLayout) -> None:
    installed = subprocess.run(["bash", str(HERE / "mlmd" / "install.sh")], capture_output=True,
                               text=True, timeout=900)
    if installed.returncode != 0:
        raise processes.StartFailed(f"mlmd/install.sh: {installed.stderr.strip()}")
    python = installed.stdout.strip().splitlines()[-1]
    procs.start("mlmd", [python, str(HERE / "mlmd" / "server.py"), f"--host={layout.node_ip}",
                         f"--port={layout.mlmd_port}", f"--db={layout.dir / 'mlmd.sqlite'}"])
    procs.wait_until("mlmd", lambda: processes.port_open(layout.mlmd_port, layout.node_ip),
                     READY_TIMEOUT_S)


def _apply(bed, documents) -> None:
    bed.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", "-",
                    stdin=yaml.safe_dump_all(list(documents), sort_keys=False))


def _install_objects(bed, layout: KfpLayout, kfp_source: Path) -> None:
    """The namespace, KFP's and Argo's CRDs and RBAC, the bed's bindings, Services, Secret and
    ConfigMaps."""
    source = kfp_source / "manifests" / "kustomize" / "base"
    argo = ARGO.source() / "manifests"
    _apply(bed, [{"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": kfp_config.NAMESPACE}}])
    crds = kfp_config.read_manifests(sorted((argo / kfp_config.ARGO_CRDS).glob("argoproj.io_*.yaml"))
                                     + [source / kfp_config.KFP_MANIFESTS[0]])
    _apply(bed, crds)
    bed_crds.wait_established(bed, [crd["metadata"]["name"] for crd in crds])
    rbac = kfp_config.read_manifests([source / path for path in kfp_config.KFP_MANIFESTS[1:]]
                                     + [argo / kfp_config.ARGO_ROLE])
    _apply(bed, kfp_config.namespaced(rbac) + kfp_config.identity_bindings()
           + kfp_config.config_objects() + kfp_config.service_objects(layout))


def _kubeconfigs(bed) -> Dict[str, Path]:
    authority = certs.Authority(bed.layout.pki)
    found = {}
    for name, (user, _) in kfp_config.IDENTITIES.items():
        authority.issue(name, user)
        found[name] = node.write_kubeconfig(bed, name, name, user)
    return found


def start(bed, procs: processes.Processes, node_ip: str, binaries: Mapping[str, str],
          images: Mapping[str, str]) -> KfpLayout:
    """Starts KFP's backend beside a running bed on the genuine node; returns once its API
    answers, and writes its address to `DIR/kfp-host`.

    Args:
        bed: The bed (its node Ready, CoreDNS answering).
        procs: The bed's processes (KFP's are stopped with them).
        node_ip: The node's address on its bridge.
        binaries: {name: path} of the bed's binaries, KFP's, Argo's and MinIO's among them, and
            `kfp-source`: the KFP source they were built from (whose manifests are applied).
        images: {"kfp-driver" | "kfp-launcher" | "argoexec": image reference} in containerd.
    """
    layout = plan(bed.root, node_ip)
    layout.dir.mkdir(parents=True, exist_ok=True)
    (bed.root / RECORD).write_text(json.dumps(layout.to_json(), indent=1))
    kubeconfigs = _kubeconfigs(bed)
    _start_database(procs, layout)
    _start_object_store(procs, layout, binaries["minio"])
    _start_mlmd(procs, layout)
    _install_objects(bed, layout, Path(binaries["kfp-source"]))

    procs.start("workflow-controller", kfp_config.workflow_controller_argv(
        binaries["workflow-controller"], kubeconfigs["workflow-controller"], images["argoexec"]),
        env={**os.environ, "LEADER_ELECTION_DISABLE": "true",
             "DEFAULT_REQUEUE_TIME": kfp_config.ARGO_REQUEUE_TIME},
        # Argo v4.0.5's logging catches SIGTERM and SIGINT and never exits on them
        # (util/logging/init.go): in a pod the kubelet's SIGKILL ends it after the grace period.
        stop_signal=signal.SIGKILL)
    procs.wait_until("workflow-controller", lambda: processes.http_ok(
        f"http://127.0.0.1:{kfp_config.ARGO_HEALTH_PORT}/healthz"), READY_TIMEOUT_S)

    config_dir = layout.dir / "config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "config.json").write_text(json.dumps(kfp_config.apiserver_config(layout),
                                                       indent=1))
    procs.start("kfp-apiserver", kfp_config.apiserver_argv(binaries["kfp-apiserver"], layout),
                env={**_host_env(), **kfp_config.apiserver_env(kubeconfigs["kfp-apiserver"],
                                                                images)},
                # Its first SIGTERM only cancels a context; its HTTP server serves on.
                second_sigterm_after_s=1.0)
    procs.wait_until("kfp-apiserver", lambda: processes.http_ok(
        f"{layout.host}/apis/v1beta1/healthz"), READY_TIMEOUT_S)

    token = layout.dir / "persistence-agent-token"
    token.write_text(bed.kubectl_run(
        "create", "token", "ml-pipeline-persistenceagent", "-n", kfp_config.NAMESPACE,
        "--audience=pipelines.kubeflow.org").stdout.strip())
    agent = kubeconfigs["kfp-persistence-agent"]
    procs.start("kfp-persistence-agent", operators.in_own_mounts(token, AGENT_TOKEN)
                + kfp_config.persistence_agent_argv(binaries["kfp-persistence-agent"], layout,
                                                    agent),
                env={**_host_env(), "KUBECONFIG": str(agent)})
    swf = kubeconfigs["kfp-scheduledworkflow"]
    procs.start("kfp-scheduledworkflow", kfp_config.scheduledworkflow_argv(
        binaries["kfp-scheduledworkflow"], layout, swf, processes.free_port()),
        env={**_host_env(), "KUBECONFIG": str(swf), "CRON_SCHEDULE_TIMEZONE": "UTC"})
    (bed.root / KFP_HOST_FILE).write_text(layout.host + "\n")
    kfp_ui.start(procs, layout, binaries, kubeconfigs["kfp-ui"], _host_env())
    return layout


def _host_env() -> Dict[str, str]:
    """The host's environment without proxies (the API server copies them into every driver
    pod) and without an in-cluster address (client-go would prefer it to KUBECONFIG)."""
    dropped = {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
               "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    return {key: value for key, value in os.environ.items() if key not in dropped}
