"""The Kubeflow Pipelines UI on the bed: KFP 2.17's React client served by its own Node server
(`build_ui.sh`), in front of the bed's API server, object store and MLMD, as host processes of the
bed (stopped with it).

KFP's manifests put Envoy between the UI and MLMD's gRPC service, to translate the browser's
gRPC-Web; the bed runs improbable-eng's grpcwebproxy for that (Envoy is not built here). The
server runs under its own identity, bound to the `ml-pipeline-ui` Role of KFP's manifests: it
reads pods' logs through the API server, and a finished step's log from Argo's archive on the
object store.

    start(procs, layout, binaries, kubeconfig)   # once the UI answers
    layout.ui                                    # the address a browser opens
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping

from cluster import kfp_config, processes
from cluster.kfp_config import KfpLayout

UI_ADDRESS_FILE = "kfp-ui"
READY_TIMEOUT_S = 120.0


def grpcwebproxy_argv(binary: str, layout: KfpLayout) -> List[str]:
    """The gRPC-Web proxy's command line: plain HTTP on 127.0.0.1, MLMD's service behind it."""
    return [binary, "--server_bind_address=127.0.0.1",
            f"--server_http_debug_port={layout.mlmd_web_port}", "--run_tls_server=false",
            f"--backend_addr={layout.node_ip}:{layout.mlmd_port}", "--allow_all_origins",
            "--backend_max_call_recv_msg_size=104857600",
            "--server_http_max_write_timeout=60s", "--server_http_max_read_timeout=60s"]


def server_argv(ui: Path, layout: KfpLayout) -> List[str]:
    """The Node server's command line (KFP's image: `node dist/server.js ../client/ 3000`)."""
    return ["node", str(ui / "server" / "dist" / "server.js"), str(ui / "client"),
            str(layout.ui_port)]


def server_env(layout: KfpLayout, kubeconfig: Path) -> Dict[str, str]:
    """What KFP's UI Deployment sets, with the bed's addresses: the API server, the object store
    (no namespace suffix: it is a host address), MLMD's gRPC-Web proxy and Argo's log archive.

    An artifact's store is the one its launcher recorded (`seaweedfs.kubeflow:9000`, the
    `kfp-launcher` default), a Service's name a pod resolves but this host process does not:
    the server's own `MINIO_ENDPOINT_REWRITE` maps it to the bed's store."""
    service = f"seaweedfs.{kfp_config.NAMESPACE}:{kfp_config.SERVICES['seaweedfs']['s3']}"
    return {"ML_PIPELINE_SERVICE_HOST": layout.node_ip,
            "ML_PIPELINE_SERVICE_PORT": str(layout.http_port),
            "MINIO_HOST": layout.node_ip, "MINIO_PORT": str(layout.s3_port),
            "MINIO_NAMESPACE": "", "MINIO_ACCESS_KEY": kfp_config.ACCESS_KEY,
            "MINIO_SECRET_KEY": kfp_config.SECRET_KEY,
            "MINIO_ENDPOINT_REWRITE": f"{service}={layout.s3_endpoint}",
            "METADATA_ENVOY_SERVICE_SERVICE_HOST": "127.0.0.1",
            "METADATA_ENVOY_SERVICE_SERVICE_PORT": str(layout.mlmd_web_port),
            "ARGO_ARCHIVE_LOGS": "true", "ARGO_ARCHIVE_BUCKETNAME": kfp_config.BUCKET,
            "ARGO_KEYFORMAT": kfp_config.ARGO_KEY_FORMAT,
            "FRONTEND_SERVER_NAMESPACE": kfp_config.NAMESPACE, "DISABLE_GKE_METADATA": "true",
            "KUBECONFIG": str(kubeconfig)}


def start(procs: processes.Processes, layout: KfpLayout, binaries: Mapping[str, str],
          kubeconfig: Path, host_env: Mapping[str, str]) -> str:
    """Starts MLMD's gRPC-Web proxy and the UI's server; returns the UI's address once it
    answers, and writes it to `DIR/kfp-ui`.

    Args:
        procs: The bed's processes.
        layout: KFP's layout on the bed (its API server, object store and MLMD running).
        binaries: The bed's binaries: `grpcwebproxy` and `kfp-ui` (the UI's build directory).
        kubeconfig: The UI server's own kubeconfig.
        host_env: The environment the host processes start from.
    """
    procs.start("mlmd-grpc-web", grpcwebproxy_argv(binaries["grpcwebproxy"], layout))
    procs.wait_until("mlmd-grpc-web", lambda: processes.port_open(layout.mlmd_web_port),
                     READY_TIMEOUT_S)
    ui = Path(binaries["kfp-ui"])
    procs.start("kfp-ui", server_argv(ui, layout), cwd=ui / "server",
                env={**host_env, **server_env(layout, kubeconfig)})
    procs.wait_until("kfp-ui", lambda: processes.http_ok(f"{layout.ui}/apis/v1beta1/healthz"),
                     READY_TIMEOUT_S)
    (layout.root / UI_ADDRESS_FILE).write_text(layout.ui + "\n")
    return layout.ui


def address(root: Path) -> str:
    """The UI's address on the bed in ROOT."""
    return (Path(root) / UI_ADDRESS_FILE).read_text().strip()

