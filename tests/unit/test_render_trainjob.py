"""TrainJobs as the step renders them, and kfdist's runtimes, against Kubeflow Trainer's CRDs.

Every rendered TrainJob and both ClusterTrainingRuntimes validate against the
v2.3.0 CRDs with zero unknown fields; a v2.1 cluster gets `podTemplateOverrides`
(validated against the v2.1.0 TrainJob CRD). The runtimes are held to the
constants the step and the replicas rely on.
"""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import kfdist
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.job import config, jobset_cluster
from kfdist.components.train_distributed.kubernetes import backend
from kfdist.components.train_distributed.kubernetes import backend as backend_module
from kfdist.components.train_distributed.kubernetes.build import render_trainjob as rt
from kfdist.components.train_distributed.kubernetes.build import trainjob_runtime as runtimes

from fakes import crd_schema

REPO = Path(__file__).resolve().parents[2]
RUNTIMES = {d["metadata"]["name"]: d for f in sorted((REPO / "manifests" / "runtimes").glob("*.yaml"))
            if f.name != "kustomization.yaml" for d in yaml.safe_load_all(f.read_text())
            if d["kind"] == "ClusterTrainingRuntime"}
CONFIGS = {
    "mwms, chief, evaluator, GPUs, PVC": dict(
        strategy="multi_worker_mirrored", workers=2, chief=True, evaluator=True, gpus_per_worker=1,
        cpu_per_worker="4", memory_per_worker="8Gi", node_selector={"pool": "gpu"},
        service_account="trainer", pvc_name="data", work_uri="/mnt/kfdist/work"),
    "parameter server with deadline": dict(
        strategy="parameter_server", workers=2, ps=1, active_deadline_seconds=3600,
        work_uri="gs://bucket/work"),
    "horovod, 2 slots": dict(strategy="horovod", workers=3, slots_per_worker=2, gpus_per_worker=2,
                             work_uri="gs://bucket/work"),
}


def _crd(name: str) -> crd_schema.Crd:
    return crd_schema.load_crd(crd_schema.crd_path(name))


TRAINJOB_V2_3 = crd_schema.CRD_FILES[("TrainJob", "v1alpha1")]
RUNTIME_V2_3 = crd_schema.CRD_FILES[("ClusterTrainingRuntime", "v1alpha1")]


def render(customisation: str = rt.RUNTIME_PATCHES, **values):
    values.setdefault("work_uri", "gs://bucket/work")
    step = runtime.build_job(backend="trainjob", run_id="run-1", namespace="team", **values)
    job = config.JobConfig(dataset_dir="dataset", model_dir="model", work_dir="reports",
                           training=step.training, job=step.spec)
    return backend.render_step_job(job, step.cluster, None, customisation)[0]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_rendered_trainjobs_match_the_v2_3_crd_exactly(name):
    job = render(**CONFIGS[name])
    assert _crd(TRAINJOB_V2_3).validate(job.body) == []
    assert job.body["spec"]["runtimeRef"]["name"] == runtimes.runtime_for(CONFIGS[name]["strategy"])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_v2_1_cluster_gets_pod_template_overrides(name):
    values = {k: v for k, v in CONFIGS[name].items() if k != "active_deadline_seconds"}
    job = render(rt.POD_TEMPLATE_OVERRIDES, **values)
    assert _crd(crd_schema.TRAINJOB_V2_1_CRD).validate(job.body) == []
    assert "runtimePatches" not in job.body["spec"]
    newer = render(**values)
    assert any("unknown field" in e for e in _crd(crd_schema.TRAINJOB_V2_1_CRD).validate(newer.body))


def test_the_trainer_gets_the_replica_command_nodes_and_resources():
    trainer = render(**CONFIGS["mwms, chief, evaluator, GPUs, PVC"]).body["spec"]["trainer"]
    assert trainer["command"][-2:] == ["--work-uri", "/mnt/kfdist/work"]
    assert trainer["numNodes"] == 4  # chief, 2 workers, evaluator: one pod each
    assert trainer["resourcesPerNode"] == {"requests": {"cpu": "4", "memory": "8Gi"},
                                           "limits": {"cpu": "4", "memory": "8Gi",
                                                      "nvidia.com/gpu": 1}}
    horovod = render(**CONFIGS["horovod, 2 slots"]).body["spec"]["trainer"]
    assert horovod["command"][:3] == ["mpirun", "-np", "6"]
    assert (horovod["numNodes"], horovod["numProcPerNode"]) == (3, 2)
    assert horovod["image"] == kfdist.HOROVOD_IMAGE


def test_pod_settings_and_run_labels_reach_every_replicated_job():
    job = render(**CONFIGS["horovod, 2 slots"], node_selector={"pool": "gpu"})
    patch = job.body["spec"]["runtimePatches"][0]
    assert patch["manager"] == rt.PATCH_MANAGER
    jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["node", "launcher"]
    for replicated in jobs:
        pod = replicated["template"]["spec"]["template"]
        assert pod["metadata"]["labels"]["kfdist.dev/run-id"] == "run-1"
        assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
        assert "env" not in str(pod)  # Trainer refuses env patches of the `node` container
    pvc = render(**CONFIGS["mwms, chief, evaluator, GPUs, PVC"]).body["spec"]["runtimePatches"][0]
    pod = pvc["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["containers"] == [{"name": "node", "volumeMounts": [
        {"name": "kfdist-pvc-0", "mountPath": "/mnt/kfdist"}]}]
    assert pod["spec"]["serviceAccountName"] == "trainer"


def test_the_log_follows_node_0_or_the_launcher():
    assert render(strategy="multi_worker_mirrored").log_pod_selector == {
        "jobset.sigs.k8s.io/jobset-name": render(strategy="multi_worker_mirrored").name,
        "jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "0"}
    assert render(strategy="horovod").log_pod_selector["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"
    assert render(strategy="horovod").pods_selector().startswith("jobset.sigs.k8s.io/jobset-name=")


@pytest.mark.parametrize("values, fragment", [
    (dict(restart_policy="Never"), "runtime kfdist-tensorflow, whose policy is 'ExitCode'"),
    (dict(backoff_limit=2), r"backoff limit of its runtime kfdist-tensorflow \(6\)"),
    (dict(strategy="horovod", image="registry.example/mine:1.0"), "edit both images in the runtime"),
    (dict(active_deadline_seconds=60, customisation=rt.POD_TEMPLATE_OVERRIDES), "Trainer v2.2"),
])
def test_what_the_runtime_cannot_carry_is_refused_before_anything_is_created(values, fragment):
    values = dict(values)
    customisation = values.pop("customisation", rt.RUNTIME_PATCHES)
    with pytest.raises(InvalidInputError, match=fragment):
        render(customisation, **values)


# ---- the runtimes ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [runtimes.TF_RUNTIME, runtimes.HOROVOD_RUNTIME])
def test_runtimes_match_the_v2_3_crd_exactly(name):
    assert _crd(RUNTIME_V2_3).validate(RUNTIMES[name]) == []


@pytest.mark.parametrize("name", [runtimes.TF_RUNTIME, runtimes.HOROVOD_RUNTIME])
def test_runtime_pod_templates_match_the_kubernetes_schema_strictly(name):
    for job in RUNTIMES[name]["spec"]["template"]["spec"]["replicatedJobs"]:
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": job["name"]},
                    "template": job["template"]["spec"]["template"]}
        kubernetes_validate.validate(template, "1.30", strict=True)


@pytest.mark.parametrize("name", [runtimes.TF_RUNTIME, runtimes.HOROVOD_RUNTIME])
def test_runtimes_are_what_the_step_expects(name):
    spec = RUNTIMES[name]["spec"]
    jobs = {j["name"]: j for j in spec["template"]["spec"]["replicatedJobs"]}
    assert tuple(jobs) == runtimes.REPLICATED_JOBS[name]
    trainer_jobs = [n for n, j in jobs.items() if (j["template"].get("metadata") or {}).get(
        "labels", {}).get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"]
    assert trainer_jobs == (["launcher"] if name == runtimes.HOROVOD_RUNTIME else ["node"])
    assert "numNodes" in spec["mlPolicy"]  # else Trainer ignores resourcesPerNode
    trainer_job = jobs[trainer_jobs[0]]["template"]["spec"]
    assert trainer_job["backoffLimit"] == runtimes.BACKOFF_LIMIT
    pod = trainer_job["template"]["spec"]
    policy = {"Never": "ExitCode", "OnFailure": "OnFailure"}[pod["restartPolicy"]]
    assert policy == runtimes.RESTART_POLICIES[name]
    for job in jobs.values():
        container = job["template"]["spec"]["template"]["spec"]["containers"][0]
        assert container["name"] == runtimes.NODE_CONTAINER
        assert container["image"] == f"{kfdist.DEFAULT_REGISTRY}/kfdist-{runtimes.RUNTIME_IMAGE_NAMES[name]}:{kfdist.__version__}"


def test_the_tensorflow_runtime_gives_replicas_their_identity_and_the_exit_code_policy():
    node = RUNTIMES[runtimes.TF_RUNTIME]["spec"]["template"]["spec"]["replicatedJobs"][0]
    job = node["template"]["spec"]
    container = job["template"]["spec"]["containers"][0]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]} == \
        jobset_cluster.IDENTITY_ENV
    assert [p["containerPort"] for p in container["ports"]] == [jobset_cluster.TF_PORT]
    assert job["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    fail, ignore = job["podFailurePolicy"]["rules"]
    assert fail["action"] == "FailJob" and fail["onExitCodes"]["values"] == list(range(1, 128))
    # `status` spelled out: Trainer v2.1's runtime CRD requires it (v2.3 defaults it to True).
    assert ignore == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                               "status": "True"}]}
    assert job["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy needs it


def test_the_horovod_runtime_runs_the_launcher_after_the_nodes_are_ready():
    spec = RUNTIMES[runtimes.HOROVOD_RUNTIME]["spec"]
    assert spec["mlPolicy"]["mpi"] == {"numProcPerNode": 1, "mpiImplementation": "OpenMPI",
                                       "sshAuthMountPath": kfdist.HOROVOD_IMAGE_SSH_DIR,
                                       "runLauncherAsNode": True}
    launcher = spec["template"]["spec"]["replicatedJobs"][1]
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert spec["template"]["spec"]["successPolicy"] == {"operator": "All",
                                                         "targetReplicatedJobs": ["launcher"]}
    node = spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert node["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]


def test_a_runtime_with_a_typo_is_caught():
    broken = copy.deepcopy(RUNTIMES[runtimes.TF_RUNTIME])
    broken["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["sucessPolicy"] = {}
    assert any("unknown field" in e for e in _crd(RUNTIME_V2_3).validate(broken))


# ---- Kueue ---------------------------------------------------------------------------------

@pytest.mark.parametrize("backend, strategy", [("trainjob", "multi_worker_mirrored"),
                                               ("tfjob", "multi_worker_mirrored"),
                                               ("mpijob", "horovod")])
def test_queue_name_labels_every_kind_of_job(backend, strategy):
    step = runtime.build_job(backend=backend, strategy=strategy, run_id="run-1", namespace="team",
                             work_uri="gs://bucket/work", queue_name="team-queue")
    job = config.JobConfig(dataset_dir="d", model_dir="m", work_dir="r", training=step.training,
                           job=step.spec)
    rendered = backend_module.render_step_job(job, step.cluster, None)[0]
    assert rendered.body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-queue"
    warning = backend_module.queue_warning(backend, step.cluster)
    assert (warning is not None) == (backend == "tfjob")
    if warning:
        assert "kubeflow.org/tfjob integration off by default" in warning
        assert "Use backend trainjob" in warning


def test_a_bad_queue_name_is_refused():
    with pytest.raises(InvalidInputError, match="Team Queue"):
        render(strategy="multi_worker_mirrored", queue_name="Team Queue")


def test_timeout_from_takes_creation_or_admission():
    with pytest.raises(InvalidInputError, match="timeout_from"):
        runtime.build_job(backend="trainjob", timeout_from="submission")
