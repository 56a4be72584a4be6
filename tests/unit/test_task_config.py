"""KFP's TaskConfig passthrough: what a pipeline author sets on the training task reaches every
replica of the job the step creates (`kubernetes.task_settings` states the rule).

A user pipeline imports kfdist's components and sets a toleration, a node selector and GPU
limits on the training task; it compiles to YAML that declares the passthroughs. From that YAML
the TaskConfig is built as KFP's driver builds it (`driver_task_config`), handed through kfp's
own executor to the step's parameter (`executor_task_config`), and the step's code renders the
job from it; every rendering is checked against the operators' CRD schemas.

No `from __future__ import annotations`: kfp's executor compares annotations with `dsl.TaskConfig`.
"""

import copy

import pytest
import yaml
from google.protobuf import json_format, struct_pb2
from kfp import compiler, dsl, kubernetes
from kfp.dsl import executor
from kfp.local import executor_input_utils

from fakes import crd_schema
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.launch_program import program_cluster, program_pod
from kfdist.components.launch_program.component import train_program
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.component import train_distributed
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.kubernetes import backend, task_settings
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1
from kfdist.components.train_distributed.kubernetes.client.pod_identity import STEP_POD_FIELDS
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions
from kfdist.pipelines import registry

GPU = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
GPU_NODES = ("cloud.google.com/gke-accelerator", "nvidia-l4")
#: kfdist's own cluster parameters in every job below (its node selector joins the task's).
CLUSTER_ARGS = dict(namespace="team-a", work_uri="gs://bucket/work", node_selector={"pool": "ml"})
JOBS = {
    "tfjob, parameter server": dict(backend="tfjob", strategy="parameter_server", workers=2, ps=1,
                                    evaluator=True),
    "tfjob, chief and workers": dict(backend="tfjob", strategy="multi_worker_mirrored", workers=2,
                                     chief=True),
    "mpijob, horovod": dict(backend="mpijob", strategy="horovod", workers=2),
    "trainjob, all-reduce": dict(backend="trainjob", strategy="multi_worker_mirrored", workers=3),
    "trainjob, horovod": dict(backend="trainjob", strategy="horovod", workers=2),
}
PROGRAMS = {"tfjob": dict(framework="tensorflow", ps=1, chief=True), "pytorchjob": dict(framework="pytorch"),
            "mpijob": dict(framework="tensorflow", mpi=True, restart_policy="OnFailure"),
            "trainjob": dict(framework="pytorch")}


def user_pipeline(component, **args):
    """A pipeline of the user's own that trains with kfdist's component on GPU nodes."""
    @dsl.pipeline(name="user-gpu-training")
    def pipeline():
        data = dsl.importer(artifact_uri="gs://bucket/digits", artifact_class=dsl.Dataset)
        train = component(dataset=data.output, **args)
        train.set_accelerator_type(GPU).set_accelerator_limit(1)
        kubernetes.add_toleration(train, **GPU_TOLERATION)
        kubernetes.add_node_selector(train, *GPU_NODES)
    return pipeline


def compiled(pipeline, tmp_path):
    path = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(pipeline, str(path))
    return tuple(yaml.safe_load_all(path.read_text()))


def driver_task_config(docs, executor_label):
    """The TaskConfig JSON KFP's driver builds for the task of `executor_label`, per
    kubeflow/pipelines@7b70c7b backend/src/v2/driver: `getTaskConfigOptions` (driver.go:207, a
    field is passed on only when declared), `initPodSpecPatch` (driver.go:349-466: resources,
    the container's env), `extendPodSpecPatch` (k8s.go:158 PVCs, 196 node selector, 226
    tolerations, 522 field-path env, 626 node affinity), and `json.Marshal` of the `TaskConfig`
    struct (driver.go:114, no omitempty: unset fields are null; container.go:294)."""
    spec, platform = docs
    component = next(c for c in spec["components"].values()
                     if c.get("executorLabel") == executor_label)
    passed = {p["field"] for p in component.get("taskConfigPassthroughs", [])}
    container = spec["deploymentSpec"]["executors"][executor_label]["container"]
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].get(executor_label, {})
    known = {"tolerations", "nodeSelector", "nodeAffinity", "pvcMount", "fieldPathAsEnv",
             "podMetadata", "securityContext", "secretAsEnv"}
    assert set(k8s) <= known, "extend the driver's emulation"
    task_config = dict.fromkeys(("affinity", "tolerations", "nodeSelector", "env", "volumes",
                                 "volumeMounts"))
    res = container.get("resources", {})
    limits = {k: res[f] for k, f in (("cpu", "resourceCpuLimit"), ("memory", "resourceMemoryLimit"))
              if f in res}
    requests = {k: res[f] for k, f in (("cpu", "resourceCpuRequest"),
                                       ("memory", "resourceMemoryRequest")) if f in res}
    if "accelerator" in res:
        limits[res["accelerator"]["resourceType"]] = res["accelerator"]["resourceCount"]
    # ResourceRequirements' maps are omitempty; a Quantity marshals as a string.
    task_config["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests))
                                if v and "RESOURCES" in passed}
    if "ENV" in passed:
        task_config["env"] = [{"name": e["name"], "value": e["value"]} for e in container.get("env", [])]
        task_config["env"] += secret_env(spec, k8s.get("secretAsEnv", []))  # k8s.go:347
        task_config["env"] += [{"name": e["name"], "valueFrom": {"fieldRef": {"fieldPath": e["fieldPath"]}}}
                               for e in k8s.get("fieldPathAsEnv", [])]
    if "KUBERNETES_NODE_SELECTOR" in passed and "nodeSelector" in k8s:
        task_config["nodeSelector"] = k8s["nodeSelector"]["labels"]
    if "KUBERNETES_TOLERATIONS" in passed and "tolerations" in k8s:
        task_config["tolerations"] = [
            {k: t[k] for k in ("key", "operator", "value", "effect", "tolerationSeconds")
             if t.get(k) not in (None, "")} for t in k8s["tolerations"]]
    if "KUBERNETES_VOLUMES" in passed and "pvcMount" in k8s:
        task_config["volumes"] = [{"name": m["constant"], "persistentVolumeClaim": {
            "claimName": m["constant"]}} for m in k8s["pvcMount"]]
        task_config["volumeMounts"] = [{"name": m["constant"], "mountPath": m["mountPath"]}
                                       for m in k8s["pvcMount"]]
    if "KUBERNETES_AFFINITY" in passed and "nodeAffinity" in k8s:
        preferred = [{"weight": int(t["weight"]), "preference": {
            "matchExpressions": t["matchExpressions"]}} for t in k8s["nodeAffinity"] if "weight" in t]
        required = [{"matchExpressions": t["matchExpressions"]} for t in k8s["nodeAffinity"]
                    if "weight" not in t]
        node = {"preferredDuringSchedulingIgnoredDuringExecution": preferred} if preferred else {}
        if required:
            node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
        task_config["affinity"] = {"nodeAffinity": node}
    return task_config


def secret_env(spec, secrets_as_env):
    """The driver's `env` entries of `secretAsEnv` (k8s.go:347-391), the Secret's name from the
    pipeline parameter's default where a parameter names it."""
    entries = []
    for secret in secrets_as_env:
        parameter = secret.get("secretNameParameter", {}).get("componentInputParameter")
        name = spec["root"]["inputDefinitions"]["parameters"][
            parameter.removeprefix("pipelinechannel--")]["defaultValue"] if parameter \
            else secret["secretName"]
        selector = {"name": name, "optional": True} if secret.get("optional") else {"name": name}
        entries += [{"name": e["envVar"], "valueFrom": {"secretKeyRef": {
            **selector, "key": e["secretKey"]}}} for e in secret["keyToEnv"]]
    return entries


def executor_task_config(task_config_json, tmp_path):
    """The `dsl.TaskConfig` kfp's executor passes the step (kfp/dsl/executor.py:392-405), from
    the executor input in which the driver put the JSON as a protobuf Struct
    (container.go:294-310)."""
    struct = json_format.ParseDict(task_config_json, struct_pb2.Struct())
    executor_input = {"inputs": {"parameterValues": {
        task_settings.TASK_CONFIG_PARAM: json_format.MessageToDict(struct)}},
        "outputs": {"outputFile": str(tmp_path / "executor_output.json")}}
    received = []

    def step(task_config: dsl.TaskConfig):
        received.append(task_config)

    executor.Executor(executor_input, step).execute()
    return received[0]


def local_task_config(component, tmp_path):
    """What the step's `task_config` is under kfp.local: nothing is passed for it."""
    spec = component.pipeline_spec.components[f"comp-{component.name.replace('_', '-')}"]
    built = executor_input_utils.construct_executor_input(spec, {}, str(tmp_path), False)
    executor_input = executor_input_utils.executor_input_to_dict(built, spec)
    executor_input["outputs"]["outputFile"] = str(tmp_path / "executor_output.json")
    received = []

    def step(task_config: dsl.TaskConfig):
        received.append(task_config)

    executor.Executor(executor_input, step).execute()
    return received[0]


def render_step(task_config, **args):
    """The job `train_distributed` creates, by its own code path (as `kfdist render` does)."""
    step = runtime.build_job(task_config=task_config, run_id="run-1", task_name="train", **args)
    job = config.JobConfig(dataset_dir="dataset", model_dir="model", work_dir="reports",
                           training=step.training, job=step.spec)
    rendered = backend.render_step_job(job, step.cluster, None)[0]
    assert crd_schema.load_crd(crd_schema.crd_path_for(rendered.kind)).validate(rendered.body) == []
    return rendered


def render_program(task_config, backend_name, framework, **job_args):
    """The job `train_program` creates: its ClusterOptions, placement and rendering."""
    options = ClusterOptions(namespace="team-a", work_uri="gs://bucket/work",
                             node_selector={"pool": "ml"},
                             task=task_settings.from_task_config(task_config))
    job = ProgramJob(framework=framework, command=("python", "/app/train.py"), workers=2,
                     model_dir="gs://bucket/work/model", checkpoint_dir="gs://bucket/work/ckpt",
                     data_dir="gs://bucket/digits", **job_args)
    if backend_name == "trainjob":
        job = ProgramJob(**{**job.__dict__, "restart_policy": "OnFailure"})
    placement = program_pod.placement_for("kfdist-train-0123abcd", options.image_for(
        "horovod" if job.mpi else "multi_worker_mirrored"), options)
    rendered = program_cluster.render(job, backend_name, placement)
    assert crd_schema.load_crd(crd_schema.crd_path_for(rendered.kind)).validate(rendered.body) == []
    return rendered


def replica_pods(rendered):
    """(replica, pod spec, that replica's resources) for every replica the job describes."""
    spec = rendered.body["spec"]
    if rendered.kind == TRAINJOB_V1ALPHA1:  # pods patched per replicated Job, one resource set
        resources = spec["trainer"].get("resourcesPerNode", {})
        for patch in spec["runtimePatches"]:
            for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
                yield job["name"], job["template"]["spec"]["template"]["spec"], resources
        return
    for key in ("tfReplicaSpecs", "mpiReplicaSpecs", "pytorchReplicaSpecs"):
        for name, replica in spec.get(key, {}).items():
            pod = replica["template"]["spec"]
            yield name, pod, pod["containers"][0].get("resources", {})


def computes(rendered, replica, program=False):
    """Whether kfdist gives `replica` GPUs: not a PS or an MPI launcher, nor the chief of
    kfdist's own `parameter_server` strategy (a program's chief computes)."""
    if rendered.kind == TRAINJOB_V1ALPHA1:
        return True  # Trainer gives every node `resourcesPerNode`
    ps_chief = replica == "Chief" and "PS" in rendered.body["spec"].get("tfReplicaSpecs", {})
    return replica not in ("PS", "Launcher") and (program or not ps_chief)


@pytest.mark.parametrize("component, args", [
    (train_distributed, dict(backend="tfjob", **CLUSTER_ARGS)),
    (train_program, dict(command=["python", "/app/train.py"], backend="pytorchjob",
                         framework="pytorch", **CLUSTER_ARGS))])
def test_a_user_pipeline_declares_the_passthroughs_and_carries_the_task_settings(
        component, args, tmp_path):
    spec, platform = compiled(user_pipeline(component, **args), tmp_path)
    name = component.name.replace("_", "-")
    declared = spec["components"][f"comp-{name}"]
    assert declared["taskConfigPassthroughs"] == [
        {"field": field, **({"applyToTask": True} if apply else {})}
        for field, apply in task_settings.PASSTHROUGHS]
    param = declared["inputDefinitions"]["parameters"][task_settings.TASK_CONFIG_PARAM]
    assert (param["parameterType"], param["isOptional"]) == ("TASK_CONFIG", True)
    assert task_settings.TASK_CONFIG_PARAM not in spec["root"]["dag"]["tasks"][name]["inputs"][
        "parameters"]  # KFP's driver fills it
    accelerator = spec["deploymentSpec"]["executors"][f"exec-{name}"]["container"]["resources"][
        "accelerator"]
    assert (accelerator["resourceType"], accelerator["resourceCount"]) == (GPU, "1")
    task = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][f"exec-{name}"]
    assert task["tolerations"] == [GPU_TOLERATION]
    assert task["nodeSelector"] == {"labels": dict([GPU_NODES])}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_replica_gets_the_tasks_toleration_and_node_selector_gpus_where_it_computes(
        name, tmp_path):
    args = dict(**JOBS[name], **CLUSTER_ARGS)
    docs = compiled(user_pipeline(train_distributed, **args), tmp_path)
    received = executor_task_config(driver_task_config(docs, "exec-train-distributed"), tmp_path)
    assert received.tolerations == [GPU_TOLERATION]
    assert received.resources == {"limits": {GPU: "1"}}
    rendered = render_step(received, **args)
    pods = list(replica_pods(rendered))  # a TrainJob: one patch per replicated Job
    assert pods
    for replica, pod, resources in pods:
        assert pod["tolerations"] == [GPU_TOLERATION], replica
        assert pod["nodeSelector"] == {GPU_NODES[0]: GPU_NODES[1], "pool": "ml"}, replica
        assert resources.get("limits", {}).get(GPU) == (1 if computes(rendered, replica) else None), \
            replica


@pytest.mark.parametrize("backend_name", sorted(PROGRAMS))
def test_a_programs_replicas_get_them_too(backend_name, tmp_path):
    job_args = dict(PROGRAMS[backend_name])
    args = dict(command=["python", "/app/train.py"], backend=backend_name, **CLUSTER_ARGS,
                **{k: v for k, v in job_args.items() if k != "restart_policy"})
    docs = compiled(user_pipeline(train_program, **args), tmp_path)
    received = executor_task_config(driver_task_config(docs, "exec-train-program"), tmp_path)
    rendered = render_program(received, backend_name, **job_args)
    for replica, pod, resources in replica_pods(rendered):
        assert pod["tolerations"] == [GPU_TOLERATION], replica
        assert pod["nodeSelector"] == {GPU_NODES[0]: GPU_NODES[1], "pool": "ml"}, replica
        gpus = 1 if computes(rendered, replica, program=True) else None
        assert resources.get("limits", {}).get(GPU) == gpus, replica


@pytest.mark.parametrize("name", sorted(JOBS))
def test_under_kfp_local_the_empty_task_config_changes_nothing(name, tmp_path):
    received = local_task_config(train_distributed, tmp_path)
    assert received == dsl.TaskConfig()
    args = dict(**JOBS[name], **CLUSTER_ARGS, gpus_per_worker=1)
    assert render_step(received, **args).body == render_step(None, **args).body
    assert task_settings.from_task_config(received) == task_settings.TaskSettings()


def test_kfdists_own_parameters_win_where_both_set_the_same():
    received = dsl.TaskConfig(
        resources={"limits": {"cpu": "4", GPU: "1", "example.com/fpga": "2"},
                   "requests": {"memory": "8Gi"}},
        node_selector={"pool": "gpu", "zone": "a"},
        env=[{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "TF_CONFIG", "value": "{}"},
             {"name": "KFDIST_MODEL_DIR", "value": "/x"},
             {"name": "KFP_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                 {"name": "work", "persistentVolumeClaim": {"claimName": "work"}}],
        volume_mounts=[{"name": "data", "mountPath": "/mnt/data"},
                       {"name": "work", "mountPath": "/mnt/kfdist"}])
    rendered = render_step(received, backend="tfjob", strategy="parameter_server", workers=2,
                           ps=1, gpus_per_worker=2, namespace="team-a", pvc_name="work",
                           work_uri="/mnt/kfdist/run", node_selector={"pool": "ml"})
    pods = {replica: (pod, resources) for replica, pod, resources in replica_pods(rendered)}
    worker, resources = pods["Worker"]
    assert resources == {"requests": {"memory": "8Gi"},
                         "limits": {"cpu": "4", GPU: 2, "example.com/fpga": 2}}
    assert pods["PS"][1] == {"requests": {"memory": "8Gi"}, "limits": {"cpu": "4"}}
    assert worker["nodeSelector"] == {"pool": "ml", "zone": "a"}
    assert [e["name"] for e in worker["containers"][0]["env"]] == ["NCCL_DEBUG"]
    assert worker["volumes"] == [{"name": "kfdist-pvc-0", "persistentVolumeClaim": {
        "claimName": "work"}}, {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    assert [m["mountPath"] for m in worker["containers"][0]["volumeMounts"]] == [
        "/mnt/kfdist", "/mnt/data"]


def test_horovod_ranks_get_the_tasks_environment_through_mpirun():
    received = dsl.TaskConfig(env=[{"name": "NCCL_DEBUG", "value": "INFO"}])
    rendered = render_step(received, backend="mpijob", strategy="horovod", workers=2,
                           **CLUSTER_ARGS)
    launcher = rendered.body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    command = launcher["containers"][0]["command"]
    assert command[command.index("NCCL_DEBUG") - 1] == "-x"


def test_in_kfdists_pipelines_the_step_keeps_its_identity_and_the_replicas_avoid_no_gpu():
    """The shipped pipelines set the step pod's identity (KFP_POD_*, for the job's owner
    reference) and a preference for nodes without GPUs on the training task: the identity stays
    on the step's pod only, the preference moves to the replicas (moot where they need GPUs)."""
    with open(registry.compiled_path("mnist")) as f:
        docs = tuple(yaml.safe_load_all(f))
    declared = docs[0]["components"]["comp-train-distributed"]["taskConfigPassthroughs"]
    assert {"applyToTask": True, "field": "ENV"} in declared
    received = driver_task_config(docs, "exec-train-distributed")
    keys = [e for e in received["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert {e["name"] for e in received["env"]} == {name for name, _ in STEP_POD_FIELDS} | {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert all(name.startswith(task_settings.STEP_ENV_PREFIXES) for name, _ in STEP_POD_FIELDS)
    for work_uri in ("gs://bucket/work", "minio://mlpipeline/work"):
        rendered = render_step(dsl.TaskConfig(env=received["env"], affinity=received["affinity"]),
                               backend="tfjob", **{**CLUSTER_ARGS, "work_uri": work_uri})
        for replica, pod, _ in replica_pods(rendered):
            # The object store's keys by reference, once: the task's, as KFP's driver gave them.
            assert pod["containers"][0]["env"] == keys, replica
            assert pod["affinity"] == received["affinity"], replica


@pytest.mark.parametrize("changes, expected", [
    (dict(resources={"limits": {GPU: "0.5"}}), "nvidia.com/gpu limit '0.5' is not a whole number"),
    (dict(resources={"limits": {"cpu": "lots"}}), "cpu_limit 'lots' is not a positive"),
    (dict(tolerations=[{"key": GPU, "effect": "Sometimes"}]), "toleration effect 'Sometimes'"),
    (dict(node_selector={"pool": "a b"}), "the task's node selector['pool'] value 'a b'"),
    (dict(volumes=[{"name": "kfdist-pvc-0", "emptyDir": {}}]), "volume name 'kfdist-pvc-0'"),
    (dict(volumes=[{"name": "v", "emptyDir": {}}],
          volume_mounts=[{"name": "w", "mountPath": "/w"}]), "needs an absolute mountPath and one"),
    (dict(env=[{"name": "1X", "value": "v"}]), "environment variable {'name': '1X'"),
])
def test_what_kubernetes_would_refuse_is_named_before_anything_is_created(changes, expected):
    with pytest.raises(InvalidInputError, match=expected.replace("[", r"\[").replace("(", r"\(")):
        render_step(dsl.TaskConfig(**changes), backend="tfjob", **CLUSTER_ARGS)


def test_the_task_config_is_not_changed_by_rendering():
    received = dsl.TaskConfig(env=[{"name": "A", "value": "1"}],
                              affinity={"nodeAffinity": {}},
                              volumes=[{"name": "v", "emptyDir": {}}],
                              volume_mounts=[{"name": "v", "mountPath": "/v"}])
    before = copy.deepcopy(received)
    body = render_step(received, backend="tfjob", **CLUSTER_ARGS).body
    body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"][0]["name"] = "changed"
    assert received == before


def test_only_a_task_config_is_taken():
    with pytest.raises(InvalidInputError, match="must be the dsl.TaskConfig KFP passes"):
        task_settings.from_task_config({"nodeSelector": {"pool": "gpu"}})
