"""What Kubeflow Pipelines on the bed is configured with: pure functions of the bed's addresses
and ports that render the API server's `config.json`, the processes' command lines and the
cluster objects (`kfp.py` starts the processes and applies the objects).

The backend runs as host processes, as KFP's own developer set-up runs its API server
(`backend/README.md`): the API server, the persistence agent, the scheduled-workflow controller,
Argo's workflow controller, MariaDB, MinIO and the MLMD server. The runs' pods reach them through
Services without selectors whose EndpointSlices name the node's address, under the names and
ports KFP's driver and launcher are compiled with: `ml-pipeline` (8888, 8887),
`metadata-grpc-service` (8080) and `seaweedfs` (9000), the object store KFP 2.17 installs and
its launcher addresses `minio://` URIs at; MinIO serves it here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, List, Mapping

import yaml

#: KFP's namespace: its driver is compiled with `ml-pipeline.kubeflow.svc...` and its launcher
#: addresses `seaweedfs.kubeflow:9000`, so the backend's objects live here.
NAMESPACE = "kubeflow"
CLUSTER_DOMAIN = "cluster.local"
#: {Service: {port name: the port pods connect to}}, as KFP's manifests name them.
SERVICES = {"ml-pipeline": {"http": 8888, "grpc": 8887},
            "metadata-grpc-service": {"grpc-api": 8080},
            "seaweedfs": {"s3": 9000}}
#: The object store's bucket and credentials (KFP's `mlpipeline-minio-artifact` Secret's).
BUCKET = "mlpipeline"
ACCESS_KEY = "minio"
SECRET_KEY = "minio123"
ARTIFACT_SECRET = "mlpipeline-minio-artifact"
DEFAULT_PIPELINE_ROOT = f"minio://{BUCKET}/v2/artifacts"
PIPELINE_RUNNER = "pipeline-runner"
#: Argo's controller serves its health on this port, always (`cmd/workflow-controller`).
ARGO_HEALTH_PORT = 6060
#: How soon Argo's controller looks at a workflow again (`DEFAULT_REQUEUE_TIME`; 10 s by default):
#: the wait between one step's end and the next step's pod. kfdist's pipelines are short steps,
#: each behind a driver pod, and Argo's own guidance for such workflows is as low as 2 s: on the
#: tabular pipeline it cut a run from about 124 s to about 96 (`python -m benchmarks --only
#: kfp_backend`).
ARGO_REQUEUE_TIME = "2s"
#: Where Argo archives each pod's log in BUCKET (KFP's manifests' keyFormat): the UI reads a
#: finished step's log there.
ARGO_KEY_FORMAT = ("private-artifacts/{{workflow.namespace}}/{{workflow.name}}/"
                   "{{workflow.creationTimestamp.Y}}/{{workflow.creationTimestamp.m}}/"
                   "{{workflow.creationTimestamp.d}}/{{pod.name}}")
#: The host processes' identities: {process: (certificate user, KFP's Role it is bound to)}.
IDENTITIES = {"kfp-apiserver": ("kfp-apiserver", "ml-pipeline"),
              "kfp-persistence-agent": ("kfp-persistence-agent",
                                        "ml-pipeline-persistenceagent-role"),
              "kfp-scheduledworkflow": ("kfp-scheduledworkflow",
                                        "ml-pipeline-scheduledworkflow-role"),
              "workflow-controller": ("argo-workflow-controller", "argo-role"),
              "kfp-ui": ("kfp-ui", "ml-pipeline-ui")}
#: KFP's manifests the bed applies as they are (in NAMESPACE), under `manifests/kustomize/base`.
KFP_MANIFESTS = ("pipeline/cluster-scoped/scheduled-workflow-crd.yaml",
                 "pipeline/ml-pipeline-apiserver-role.yaml",
                 "pipeline/ml-pipeline-persistenceagent-role.yaml",
                 "pipeline/ml-pipeline-persistenceagent-sa.yaml",
                 "pipeline/ml-pipeline-scheduledworkflow-role.yaml",
                 "pipeline/ml-pipeline-ui-role.yaml",
                 "pipeline/pipeline-runner-role.yaml",
                 "pipeline/pipeline-runner-sa.yaml",
                 "pipeline/pipeline-runner-rolebinding.yaml")
#: Argo's, under its module's `manifests/`: the CRDs and the controller's Role.
ARGO_CRDS = "base/crds/minimal"
ARGO_ROLE = "namespace-install/workflow-controller-rbac/workflow-controller-role.yaml"


@dataclasses.dataclass(frozen=True)
class KfpLayout:
    """Where KFP's processes listen and keep their files.

    Attributes:
        root: The bed's directory (KFP's files are under `ROOT/kfp`).
        node_ip: The node's address on its bridge: what pods reach the host processes at.
        http_port: The API server's HTTP port (on `node_ip`).
        grpc_port: The API server's gRPC port (on every address: its HTTP gateway dials
            `localhost`).
        mlmd_port: The MLMD server's port (on `node_ip`).
        s3_port: MinIO's S3 port (on `node_ip`).
        db_port: MariaDB's port (on 127.0.0.1: only the API server uses it).
        ui_port: The UI's port (its Node server listens on every address, as in its pod).
        mlmd_web_port: The gRPC-Web proxy's port in front of MLMD (on 127.0.0.1: only the UI's
            server reads it).
    """

    root: Path
    node_ip: str
    http_port: int
    grpc_port: int
    mlmd_port: int
    s3_port: int
    db_port: int
    ui_port: int
    mlmd_web_port: int

    @property
    def dir(self) -> Path:
        return self.root / "kfp"

    @property
    def host(self) -> str:
        """The API's address, as `kfp.Client(host=...)` and `kfdist submit --host` take it."""
        return f"http://{self.node_ip}:{self.http_port}"

    @property
    def ui(self) -> str:
        """The UI's address, for a browser on this machine."""
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.node_ip}:{self.s3_port}"

    def to_json(self) -> Dict:
        return {**dataclasses.asdict(self), "root": str(self.root)}

    @classmethod
    def from_json(cls, data: Mapping) -> "KfpLayout":
        return cls(**{**data, "root": Path(data["root"])})


def apiserver_config(layout: KfpLayout) -> Dict:
    """The API server's `config.json` (what KFP's image ships, on this bed's addresses).

    Not the source tree's file as it is: that one turns on an MLflow plugin, which every run's
    creation would then try to reach.
    """
    return {
        "DBDriverName": "mysql",
        "DBConfig": {"MySQLConfig": {"Host": "127.0.0.1", "Port": str(layout.db_port),
                                     "User": "root", "Password": "", "DBName": "mlpipeline",
                                     "GroupConcatMaxLen": "4194304"},
                     "ConMaxLifeTime": "120s"},
        "ObjectStoreConfig": {"Host": layout.node_ip, "Port": str(layout.s3_port),
                              "Secure": "false", "AccessKey": ACCESS_KEY,
                              "SecretAccessKey": SECRET_KEY, "BucketName": BUCKET,
                              "PipelinePath": "pipelines"},
        "ARCHIVE_CONFIG_LOG_FILE_NAME": "main.log",
        "ARCHIVE_CONFIG_LOG_PATH_PREFIX": "/artifacts",
        "InitConnectionTimeout": "2m",
        "DEFAULTPIPELINERUNNERSERVICEACCOUNT": PIPELINE_RUNNER,
        "CacheEnabled": "true",
        "CRON_SCHEDULE_TIMEZONE": "UTC",
        "POD_NAMESPACE": NAMESPACE,
        "CLUSTER_DOMAIN": CLUSTER_DOMAIN,
        # Required at start-up; v2 runs never call the visualization server.
        "ML_PIPELINE_VISUALIZATIONSERVER_SERVICE_HOST": "127.0.0.1",
        "ML_PIPELINE_VISUALIZATIONSERVER_SERVICE_PORT": "8888",
    }


def apiserver_env(kubeconfig: Path, images: Mapping[str, str]) -> Dict[str, str]:
    """The API server's environment: its cluster, and the driver's and launcher's images that
    it compiles into each run's workflow (read from the environment only, not the config)."""
    return {"KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE,
            "V2_DRIVER_IMAGE": images["kfp-driver"], "V2_DRIVER_COMMAND": "/bin/driver",
            "V2_LAUNCHER_IMAGE": images["kfp-launcher"],
            "V2_LAUNCHER_COMMAND": "/bin/launcher-v2"}


def apiserver_argv(binary: str, layout: KfpLayout) -> List[str]:
    return [binary, f"--config={layout.dir / 'config'}",
            f"--httpPortFlag={layout.node_ip}:{layout.http_port}",
            f"--rpcPortFlag=:{layout.grpc_port}", "--logtostderr=true"]


def persistence_agent_argv(binary: str, layout: KfpLayout, kubeconfig: Path) -> List[str]:
    return [binary, "--logtostderr=true", f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}",
            f"--mlPipelineAPIServerName={layout.node_ip}",
            f"--mlPipelineServiceHttpPort={layout.http_port}",
            f"--mlPipelineServiceGRPCPort={layout.grpc_port}",
            "--ttlSecondsAfterWorkflowFinish=86400", "--numWorker=2", "--executionType=Workflow"]


def scheduledworkflow_argv(binary: str, layout: KfpLayout, kubeconfig: Path,
                           metrics_port: int) -> List[str]:
    return [binary, "--logtostderr=true", f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}",
            f"--mlPipelineAPIServerName={layout.node_ip}",
            f"--mlPipelineServiceGRPCPort={layout.grpc_port}", f"--metricsPort={metrics_port}"]


def workflow_controller_argv(binary: str, kubeconfig: Path, executor_image: str) -> List[str]:
    """Argo's controller as KFP installs it: namespaced, with the bed's executor image."""
    return [binary, f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}", "--namespaced",
            f"--managed-namespace={NAMESPACE}", "--configmap=workflow-controller-configmap",
            f"--executor-image={executor_image}", "--executor-image-pull-policy=IfNotPresent",
            "--loglevel=info"]


def minio_argv(binary: str, layout: KfpLayout) -> List[str]:
    return [binary, "server", "--quiet", f"--address={layout.node_ip}:{layout.s3_port}",
            "--console-address=127.0.0.1:0", str(layout.dir / "minio")]


def minio_env() -> Dict[str, str]:
    return {"MINIO_ROOT_USER": ACCESS_KEY, "MINIO_ROOT_PASSWORD": SECRET_KEY,
            "MINIO_BROWSER": "off", "MINIO_UPDATE": "off"}


def mariadb_argv(mariadbd: str, layout: KfpLayout) -> List[str]:
    """MariaDB as KFP's MySQL 8 stores text: utf8mb4 (MariaDB's built-in default is latin1,
    which refuses a workflow whose manifest holds a character such as `≥`)."""
    return [mariadbd, "--no-defaults", f"--datadir={layout.dir / 'mysql'}",
            f"--socket={layout.dir / 'mysql.sock'}", f"--pid-file={layout.dir / 'mysql.pid'}",
            "--bind-address=127.0.0.1", f"--port={layout.db_port}", "--skip-log-bin",
            "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=0", "--user=root",
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"]


def workflow_controller_configmap() -> Dict:
    """Argo's configuration as KFP's manifests patch it (its artifact repository is the
    object store; the executor runs as a non-root user), with metrics off: nothing scrapes
    them, and their port is the scheduled-workflow controller's default too."""
    repository = {"archiveLogs": True, "s3": {
        "endpoint": f"seaweedfs.{NAMESPACE}.svc:9000", "bucket": BUCKET, "insecure": True,
        "keyFormat": ARGO_KEY_FORMAT,
        "accessKeySecret": {"name": ARTIFACT_SECRET, "key": "accesskey"},
        "secretKeySecret": {"name": ARTIFACT_SECRET, "key": "secretkey"}}}
    executor = {"imagePullPolicy": "IfNotPresent", "securityContext": {
        "runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}
    return _object("v1", "ConfigMap", "workflow-controller-configmap", data={
        "artifactRepository": yaml.safe_dump(repository, sort_keys=False),
        "executor": yaml.safe_dump(executor, sort_keys=False),
        "metricsConfig": yaml.safe_dump({"enabled": False}),
    })


def _object(api_version: str, kind: str, name: str, **fields) -> Dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": NAMESPACE}, **fields}


def service_objects(layout: KfpLayout) -> List[Dict]:
    """Each Service pods reach a host process through, and its EndpointSlice at the node."""
    targets = {"ml-pipeline": {"http": layout.http_port, "grpc": layout.grpc_port},
               "metadata-grpc-service": {"grpc-api": layout.mlmd_port},
               "seaweedfs": {"s3": layout.s3_port}}
    objects = []
    for name, ports in SERVICES.items():
        objects.append(_object("v1", "Service", name, spec={
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}
                      for port_name, port in ports.items()]}))
        slice_ = _object("discovery.k8s.io/v1", "EndpointSlice", f"{name}-host",
                         addressType="IPv4",
                         endpoints=[{"addresses": [layout.node_ip],
                                     "conditions": {"ready": True}}],
                         ports=[{"name": port_name, "port": targets[name][port_name],
                                 "protocol": "TCP"} for port_name in ports])
        slice_["metadata"]["labels"] = {"kubernetes.io/service-name": name,
                                        "endpointslice.kubernetes.io/managed-by": "kfdist-bed"}
        objects.append(slice_)
    return objects


def config_objects() -> List[Dict]:
    """The Secret and ConfigMaps KFP's pods read: the object store's credentials, the
    launcher's default pipeline root, Argo's configuration."""
    return [_object("v1", "Secret", ARTIFACT_SECRET,
                    stringData={"accesskey": ACCESS_KEY, "secretkey": SECRET_KEY}),
            _object("v1", "ConfigMap", "kfp-launcher",
                    data={"defaultPipelineRoot": DEFAULT_PIPELINE_ROOT}),
            workflow_controller_configmap()]


def identity_bindings() -> List[Dict]:
    """RoleBindings of each host process's certificate user to the Role KFP's (or Argo's)
    manifests give its ServiceAccount."""
    return [_object("rbac.authorization.k8s.io/v1", "RoleBinding", f"{user}-bed",
                    roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": role},
                    subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                               "name": user}])
            for user, role in IDENTITIES.values()]


def namespaced(documents: List[Dict]) -> List[Dict]:
    """Manifests as applied in NAMESPACE (cluster-scoped kinds keep none)."""
    cluster_scoped = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                      "Namespace"}
    for document in documents:
        if document.get("kind") not in cluster_scoped:
            document.setdefault("metadata", {})["namespace"] = NAMESPACE
    return documents


def read_manifests(paths) -> List[Dict]:
    """Every YAML document of these files (kustomize variables are not used by them)."""
    documents = []
    for path in paths:
        documents += [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    return documents
