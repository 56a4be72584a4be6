"""Pure checks of the cluster job description and its TFJob/MPIJob renderings.

Every rendering is validated against the operators' real CRD schemas with
unknown fields counted as errors (the API server would silently prune them).
"""

from __future__ import annotations

import dataclasses
import os

import argparse
import copy
import decimal
import re
from typing import Any, Dict

import pytest
import yaml

from kfdist import render_cmd
from kfdist.components.train_distributed.job import config
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, JOB_ROLE_LABEL, MPIJOB_V1, MPIJOB_V2BETA1, REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL, TFJOB_V1)
from kfdist.components.train_distributed.kubernetes.build.job_parts import (
    PvcMount, ReplicaOverride, Resources, RunPolicy, SchedulingPolicy, Toleration)
from kfdist.components.train_distributed.kubernetes.build.job_spec import (
    GENERATED_NAME_MAX, RUN_ID_LABEL, ClusterJobSpec, job_name_for, run_labels)
from kfdist.components.train_distributed.kubernetes.build.render_mpijob import render_mpijob
from kfdist.components.train_distributed.kubernetes.build.render_tfjob import render_tfjob

from fakes import crd_schema

IMAGE = "gcr.io/kfdist/trainer:0.1.0"
LABELS = run_labels("4c0a5e52-0f5b-4a3e-9d1e-6a1f8f3b2c11", "train-distributed")
RUN_POLICY = RunPolicy(clean_pod_policy="Running", ttl_seconds_after_finished=600,
                       scheduling_policy=SchedulingPolicy(min_available=4, queue="training",
                                                          priority_class="high-priority",
                                                          schedule_timeout_seconds=300))


def _crd(kind):
    return crd_schema.load_crd(crd_schema.crd_path_for(kind))


#: The fields of a job's layout (`config.JobSpec`), given to the factories below like the rest.
LAYOUT_FIELDS = {f.name for f in dataclasses.fields(config.JobSpec)}


def _tfjob_mwms(**changes) -> ClusterJobSpec:
    fields: Dict[str, Any] = dict(
        name="mnist-mwms", namespace="kubeflow-user", backend="tfjob", strategy="multi_worker_mirrored",
        image=IMAGE, command=("python", "-m", "kfdist.components.train_distributed.replica"),
        args=("--config", "gs://bucket/job.json"), workers=3, chief=True,
        active_deadline_seconds=7200, backoff_limit=3, restart_policy="Never",
        resources=Resources(cpu="4", memory="16Gi", memory_limit="16Gi", gpus=4),
        run_policy=RUN_POLICY, node_selector={"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
        tolerations=(Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
        volumes=(PvcMount("datasets", "/mnt/data", read_only=True, sub_path="mnist"),),
        service_account="trainer",
        image_pull_secrets=("regcred",), labels=LABELS, annotations={"kfdist.dev/note": "test"},
        env={"NCCL_DEBUG": "INFO"})
    fields.update(changes)
    layout = config.JobSpec(**{k: fields.pop(k) for k in LAYOUT_FIELDS & set(fields)})
    return ClusterJobSpec(layout=layout, **fields)


def _tfjob_ps(**changes) -> ClusterJobSpec:
    base = dict(name="mnist-ps", strategy="parameter_server", workers=4, ps=2, chief=True, evaluator=True,
                resources=Resources(cpu="2", memory="4Gi", gpus=1),
                run_policy=RunPolicy(clean_pod_policy="All"), active_deadline_seconds=3600)
    base.update(changes)
    return _tfjob_mwms(**base)


def _mpijob(**changes) -> ClusterJobSpec:
    base = dict(name="mnist-hvd", backend="mpijob", strategy="horovod", workers=4, chief=False,
                slots_per_worker=2, resources=Resources(cpu="8", memory="32Gi", gpus=2), args=(),
                ssh_auth_mount_path="/home/mpiuser/.ssh")
    base.update(changes)
    return _tfjob_mwms(**base)


def _replica(body, rtype):
    specs = body["spec"].get("tfReplicaSpecs") or body["spec"]["mpiReplicaSpecs"]
    return specs[rtype]


def _container(body, rtype):
    containers = _replica(body, rtype)["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


# --- the Done-when renderings validate against the real schemas -------------------------------

@pytest.mark.parametrize("rendered_job", [
    lambda: render_tfjob(_tfjob_mwms()),
    lambda: render_tfjob(_tfjob_ps()),
    lambda: render_mpijob(_mpijob(), "v2beta1"),
    lambda: render_mpijob(_mpijob(ssh_auth_mount_path=None), "v1"),
], ids=["tfjob-mwms-chief-3x4gpu", "tfjob-ps-chief-2ps-4w-eval", "mpijob-v2beta1-4x2", "mpijob-v1-4x2"])
def test_renderings_have_zero_schema_errors(rendered_job):
    rendered = rendered_job()
    assert _crd(rendered.kind).validate(rendered.body) == []
    assert yaml.safe_load(yaml.safe_dump(rendered.body)) == rendered.body
    assert "ownerReferences" not in rendered.body["metadata"]
    assert rendered.body["metadata"]["labels"] == LABELS
    assert rendered.name == rendered.body["metadata"]["name"]


def test_tfjob_mwms_structure():
    rendered = render_tfjob(_tfjob_mwms())
    body = rendered.body
    assert (body["apiVersion"], body["kind"], rendered.kind) == ("kubeflow.org/v1", "TFJob", TFJOB_V1)
    assert list(body["spec"]["tfReplicaSpecs"]) == ["Chief", "Worker"]
    assert [_replica(body, t)["replicas"] for t in ("Chief", "Worker")] == [1, 3]
    assert body["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 600, "activeDeadlineSeconds": 7200,
        "backoffLimit": 3, "schedulingPolicy": {"minAvailable": 4, "queue": "training",
                                                "priorityClass": "high-priority",
                                                "scheduleTimeoutSeconds": 300}}
    # successPolicy is the only field at the spec root; the rest is in runPolicy.
    assert set(body["spec"]) == {"runPolicy", "successPolicy", "tfReplicaSpecs"}
    for rtype in ("Chief", "Worker"):
        container = _container(body, rtype)
        assert container["name"] == "tensorflow"
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}]
        assert container["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"},
                                          "limits": {"memory": "16Gi", "nvidia.com/gpu": 4}}
        assert container["command"][:2] == ["python", "-m"] and container["args"][0] == "--config"
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"NCCL_DEBUG": "INFO"}  # the operator adds TF_CONFIG; kfdist adds nothing
        assert container["volumeMounts"] == [{"name": "kfdist-pvc-0", "mountPath": "/mnt/data",
                                              "readOnly": True, "subPath": "mnist"}]
        template = _replica(body, rtype)["template"]
        assert template["metadata"] == {"labels": LABELS,
                                        "annotations": {"sidecar.istio.io/inject": "false"}}
        pod = template["spec"]
        assert "restartPolicy" not in pod and _replica(body, rtype)["restartPolicy"] == "Never"
        assert pod["serviceAccountName"] == "trainer" and pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["volumes"] == [{"name": "kfdist-pvc-0",
                                   "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}}]
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert dict(rendered.log_pod_selector) == {JOB_NAME_LABEL: "mnist-mwms", REPLICA_TYPE_LABEL: "chief",
                                               REPLICA_INDEX_LABEL: "0"}


def test_tfjob_without_chief_follows_worker_0_and_istio_can_be_allowed():
    rendered = render_tfjob(_tfjob_mwms(chief=False, istio_sidecar=True, labels={}, annotations={},
                                       run_policy=RunPolicy()))
    assert dict(rendered.log_pod_selector)[REPLICA_TYPE_LABEL] == "worker"
    assert rendered.label_selector() == ("training.kubeflow.org/job-name=mnist-mwms,"
                                         "training.kubeflow.org/replica-index=0,"
                                         "training.kubeflow.org/replica-type=worker")
    assert "metadata" not in _replica(rendered.body, "Worker")["template"]
    assert set(rendered.body["metadata"]) == {"name", "namespace"}


def test_tfjob_parameter_server_structure():
    body = render_tfjob(_tfjob_ps(overrides={"PS": ReplicaOverride(restart_policy="OnFailure")})).body
    assert {t: s["replicas"] for t, s in body["spec"]["tfReplicaSpecs"].items()} == {
        "Chief": 1, "PS": 2, "Worker": 4, "Evaluator": 1}
    assert "successPolicy" not in body["spec"]  # the chief decides under parameter_server
    assert body["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "activeDeadlineSeconds": 3600,
                                         "backoffLimit": 3}
    gpus = {t: _container(body, t)["resources"].get("limits", {}).get("nvidia.com/gpu")
            for t in ("Chief", "PS", "Worker", "Evaluator")}
    assert gpus == {"Chief": None, "PS": None, "Worker": 1, "Evaluator": 1}  # the coordinator needs none
    assert _replica(body, "PS")["restartPolicy"] == "OnFailure"
    assert _replica(body, "Worker")["restartPolicy"] == "Never"
    assert all(_container(body, t)["name"] == "tensorflow" for t in body["spec"]["tfReplicaSpecs"])


def test_mpijob_v2beta1_structure():
    rendered = render_mpijob(_mpijob())
    body, spec = rendered.body, rendered.body["spec"]
    assert (body["apiVersion"], body["kind"], rendered.kind) == ("kubeflow.org/v2beta1", "MPIJob",
                                                                 MPIJOB_V2BETA1)
    assert spec["slotsPerWorker"] == 2 and spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["mpiImplementation"] == "OpenMPI" and spec["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    assert spec["runPolicy"]["activeDeadlineSeconds"] == 7200 and "activeDeadlineSeconds" not in spec
    assert [_replica(body, t)["replicas"] for t in ("Launcher", "Worker")] == [1, 4]
    launcher, worker = _container(body, "Launcher"), _container(body, "Worker")
    command = launcher["command"]
    assert command[:3] == ["mpirun", "-np", "8"]
    assert command[-3:] == ["python", "-m", "kfdist.components.train_distributed.replica"]
    for name in ("PATH", "NCCL_DEBUG"):
        assert name in command[command.index("-x"):]
    assert "resources" not in launcher  # GPUs on workers only
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert "command" not in worker and "args" not in worker  # the operator runs sshd
    assert dict(rendered.log_pod_selector) == {JOB_NAME_LABEL: "mnist-hvd", JOB_ROLE_LABEL: "launcher"}


def test_mpijob_v1_structure_and_limits():
    rendered = render_mpijob(_mpijob(ssh_auth_mount_path=None, mpi_implementation="Intel"), "v1")
    spec = rendered.body["spec"]
    assert rendered.kind == MPIJOB_V1 and spec["mainContainer"] == "mpi"
    assert _container(rendered.body, "Launcher")["name"] == "mpi"
    assert "launcherCreationPolicy" not in spec and "mpiImplementation" not in spec
    assert _container(rendered.body, "Launcher")["command"][:4] == ["mpirun", "-n", "8", "-genvlist"]
    # the operator's own launcher service account may exec into workers: kfdist sets none there
    assert "serviceAccountName" not in _replica(rendered.body, "Launcher")["template"]["spec"]
    assert _replica(rendered.body, "Worker")["template"]["spec"]["serviceAccountName"] == "trainer"
    assert dict(rendered.log_pod_selector) == {JOB_NAME_LABEL: "mnist-hvd", REPLICA_TYPE_LABEL: "launcher"}
    with pytest.raises(InvalidInputError, match="ssh_auth_mount_path"):
        render_mpijob(_mpijob(), "v1")
    with pytest.raises(InvalidInputError, match="'MPICH'"):
        render_mpijob(_mpijob(ssh_auth_mount_path=None, mpi_implementation="MPICH"), "v1")
    with pytest.raises(InvalidInputError, match="'v3'"):
        render_mpijob(_mpijob(), "v3")


def test_mpijob_keeps_an_explicit_mpirun():
    spec = _mpijob(command=("mpirun", "-np", "8", "python", "train.py"))
    body = render_mpijob(spec).body
    assert body["spec"]["slotsPerWorker"] == 2
    assert _container(body, "Launcher")["command"] == ["mpirun", "-np", "8", "python", "train.py"]


# --- the validator catches what the API server would prune or refuse --------------------------

def _mutated(mutate):
    body = copy.deepcopy(render_tfjob(_tfjob_mwms()).body)
    mutate(body)
    return _crd(TFJOB_V1).validate(body)


def test_validator_reports_misplaced_and_misspelled_fields():
    errors = _mutated(lambda b: b["spec"]["runPolicy"].update(activeDeadlineSecond=60))
    assert len(errors) == 1 and errors[0].startswith("$.spec.runPolicy.activeDeadlineSecond: unknown field")

    def old_launcher(body):  # the removed KFP launcher: runPolicy fields at the spec root
        body["spec"].update(body["spec"].pop("runPolicy"))
    errors = _mutated(old_launcher)
    assert {e.split(":")[0] for e in errors} == {
        f"$.spec.{f}" for f in ("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                                "backoffLimit", "schedulingPolicy")}
    assert all("unknown field" in e for e in errors)
    errors = _mutated(lambda b: _container(b, "Worker").update(gpus=4))
    assert len(errors) == 1
    assert errors[0].startswith(
        "$.spec.tfReplicaSpecs.Worker.template.spec.containers[0].gpus: unknown field")


def _strict_jsonschema(node):
    """The CRD schema as JSON Schema with unknown fields forbidden, as the pruning API server does."""
    if isinstance(node, list):
        return [_strict_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: ({p: _strict_jsonschema(v) for p, v in node[k].items()} if k == "properties"
               else _strict_jsonschema(v)) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("type") == "object" and "additionalProperties" not in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@pytest.mark.parametrize("kind, render", [
    (TFJOB_V1, lambda: render_tfjob(_tfjob_ps())),
    (MPIJOB_V2BETA1, lambda: render_mpijob(_mpijob())),
    (MPIJOB_V1, lambda: render_mpijob(_mpijob(ssh_auth_mount_path=None), "v1")),
])
def test_jsonschema_agrees_with_the_validator(kind, render):
    import jsonschema
    crd = _crd(kind)
    schema = _strict_jsonschema(crd.schemas[kind.version])
    schema["properties"]["metadata"] = {"type": "object"}
    validator = jsonschema.Draft7Validator(schema)
    body = render().body
    assert [e.message for e in validator.iter_errors(body)] == []
    body["spec"]["runPolicy"]["activeDeadlineSecond"] = 1
    assert [e.message for e in validator.iter_errors(body)] and crd.validate(body)


@pytest.mark.parametrize("mutate, expected", [
    (lambda b: _replica(b, "Worker").update(replicas="3"), r"Worker\.replicas: must be of type integer"),
    (lambda b: _replica(b, "Worker").update(replicas=2 ** 31), r"out of range"),
    (lambda b: _container(b, "Worker")["resources"]["requests"].update(cpu="4 cores"),
     r"does not match pattern"),
    (lambda b: _container(b, "Worker").pop("name"), r"containers\[0\]: missing required field 'name'"),
    (lambda b: _replica(b, "Worker")["template"]["spec"]["containers"].append(
        copy.deepcopy(_container(b, "Worker"))), r"duplicate entries with key \{'name': 'tensorflow'\}"),
    (lambda b: _container(b, "Worker").update(image=None), r"image: null is not allowed"),
    (lambda b: b.update(apiVersion="kubeflow.org/v2"), r"\$\.apiVersion: 'kubeflow.org/v2' is not served"),
    (lambda b: b["metadata"].update(name="Bad_Name"), r"\$\.metadata\.name: 'Bad_Name'"),
    (lambda b: b["metadata"].update(labels={"a": "x" * 64}), r"\$\.metadata\.labels\.a: invalid value"),
])
def test_validator_reports_type_pattern_required_and_metadata_errors(mutate, expected):
    errors = _mutated(mutate)
    assert any(re.search(expected, e) for e in errors), errors


def test_validator_checks_enums():
    body = copy.deepcopy(render_mpijob(_mpijob()).body)
    body["spec"]["mpiImplementation"] = "MVAPICH"
    assert _crd(MPIJOB_V2BETA1).validate(body) == [
        "$.spec.mpiImplementation: 'MVAPICH' is not one of ['OpenMPI', 'Intel', 'MPICH']"]


# --- every bad input is rejected before any API call, naming the value ----------------------

@pytest.mark.parametrize("make, expected", [
    (lambda: _tfjob_mwms(workers=0), "workers must be an integer >= 1, got 0"),
    (lambda: _tfjob_mwms(workers=True), "workers must be an integer >= 1, got True"),
    (lambda: _tfjob_mwms(ps=2), "ps=2: parameter servers are used only by strategy parameter_server, not 'multi_worker_mirrored'"),
    (lambda: _tfjob_ps(ps=0), "strategy parameter_server needs ps >= 1 parameter servers, got ps=0"),
    (lambda: _tfjob_mwms(strategy="mirrored"), "strategy mirrored runs on one worker's local devices, got workers=3 and a chief"),
    (lambda: _tfjob_mwms(strategy="horovod"), "strategy 'horovod' is not supported by the 'tfjob' backend"),
    (lambda: _tfjob_mwms(backend="pytorchjob"), "a cluster job needs backend tfjob or mpijob or trainjob, got 'pytorchjob'"),
    (lambda: _mpijob(strategy="multi_worker_mirrored"),
     "strategy 'multi_worker_mirrored' is not supported by the 'mpijob' backend"),
    (lambda: _mpijob(ps=1), "ps=1: parameter servers are used only by strategy parameter_server"),
    (lambda: _mpijob(evaluator=True), "strategy horovod cannot run a side-car evaluator"),
    (lambda: _mpijob(chief=True), "strategy horovod has no chief"),
    (lambda: _mpijob(command=()), "an mpijob needs a command"),
    (lambda: _mpijob(slots_per_worker=0), "slots_per_worker must be an integer >= 1, got 0"),
    (lambda: _mpijob(slots_per_worker=4), "slots_per_worker=4 exceeds the 2 GPUs per worker"),
    (lambda: _mpijob(mpi_implementation="MVAPICH"), "unknown mpi_implementation 'MVAPICH'"),
    (lambda: _mpijob(restart_policy="ExitCode"),
     "restart_policy must be one of ['Never', 'OnFailure'] with strategy 'horovod'"),
    (lambda: _mpijob(ssh_auth_mount_path="home/.ssh"), "ssh_auth_mount_path 'home/.ssh'"),
    (lambda: _mpijob(overrides={"Launcher": ReplicaOverride(resources=Resources(gpus=1))}),
     "the MPI launcher gets no GPUs"),
    (lambda: _tfjob_mwms(slots_per_worker=2), "slots_per_worker=2 is for strategy horovod only"),
    (lambda: _tfjob_mwms(mpi_implementation="OpenMPI"),
     "mpi_implementation='OpenMPI' applies to backend 'mpijob'"),
    (lambda: _mpijob(success_policy="AllWorkers"),
     "success_policy applies to TensorFlow jobs; a horovod job ends with its launcher"),
    (lambda: _tfjob_mwms(success_policy="ChiefOnly"), "success_policy must be one of ['', 'AllWorkers']"),
    (lambda: _tfjob_mwms(resources=Resources(gpus=-1)),
     "resources: gpus must be an integer from 0 to 2147483647, got -1"),
    (lambda: _tfjob_mwms(resources=Resources(cpu="4 cores")),
     "cpu '4 cores' is not a positive Kubernetes quantity"),
    (lambda: _tfjob_mwms(resources=Resources(memory="8GB")),
     "memory '8GB' is not a positive Kubernetes quantity"),
    (lambda: _tfjob_mwms(resources=Resources(memory="0")), "memory '0' is not a positive"),
    (lambda: _tfjob_mwms(resources=Resources(cpu="4", cpu_limit="2")),
     "cpu request '4' exceeds its limit '2'"),
    (lambda: _tfjob_mwms(resources=Resources(memory="2Gi", memory_limit="2000Mi")),
     "memory request '2Gi' exceeds its limit '2000Mi'"),
    (lambda: _tfjob_mwms(name="MNIST"), "job name 'MNIST' is not a DNS-1035 label"),
    (lambda: _tfjob_mwms(name="1mnist"), "job name '1mnist' is not a DNS-1035 label"),
    (lambda: _tfjob_mwms(name="mnist-"), "job name 'mnist-' is not a DNS-1035 label"),
    (lambda: _tfjob_mwms(name="a" * 64), "is not a DNS-1035 label"),
    (lambda: _tfjob_mwms(name="a" * 55),
     "the operator would name a pod '" + "a" * 55 + "-worker-2' (64 characters"),
    (lambda: _mpijob(name="a" * 54, workers=100), "-worker-99' (64 characters"),
    (lambda: _mpijob(name="a" * 56, workers=1), "(65 characters, more than 63); shorten it by 2"),
    (lambda: _tfjob_mwms(namespace="Kubeflow"), "namespace 'Kubeflow' is not a DNS-1123 label"),
    (lambda: _tfjob_mwms(namespace=""), "namespace '' is not a DNS-1123 label"),
    (lambda: _tfjob_mwms(image="gcr.io/kfdist/trainer"), "image 'gcr.io/kfdist/trainer' has no tag"),
    (lambda: _tfjob_mwms(image="gcr.io/kfdist/trainer:latest"),
     "image 'gcr.io/kfdist/trainer:latest' is tagged ':latest'"),
    (lambda: _tfjob_mwms(image="trainer"), "image 'trainer' has no tag"),
    (lambda: _tfjob_mwms(image="Trainer:1.0"), "image 'Trainer:1.0' is not a valid image reference"),
    (lambda: _tfjob_mwms(image=""), "image '' must be a non-empty image reference"),
    (lambda: _tfjob_mwms(labels={"Bad Key": "x"}), "labels key 'Bad Key' is not valid"),
    (lambda: _tfjob_mwms(labels={"kfdist.dev/run": "has space"}), "value 'has space' is not a valid label value"),
    (lambda: _tfjob_mwms(labels={"kfdist.dev/run": "x" * 64}), "is not a valid label value"),
    (lambda: _tfjob_mwms(labels={"Example.com/a": "x"}), "prefix 'Example.com' must be a DNS subdomain"),
    (lambda: _tfjob_mwms(labels={"training.kubeflow.org/job-name": "x"}), "is reserved: the operators set"),
    (lambda: _tfjob_mwms(node_selector={"gpu": "nvidia tesla"}), "node_selector['gpu'] value 'nvidia tesla'"),
    (lambda: _tfjob_mwms(annotations={"-bad": "x"}), "annotations key '-bad' is not valid"),
    (lambda: _tfjob_mwms(env={"TF_CONFIG": "{}"}),
     "environment variable 'TF_CONFIG' is set by kfdist or the operator"),
    (lambda: _tfjob_mwms(env={"1BAD": "x"}), "environment variable name '1BAD' is not valid"),
    (lambda: _tfjob_mwms(env={"N": 3}), "environment variable 'N' must be a string, got 3"),
    (lambda: _tfjob_mwms(command=["python"]), "command must be a tuple of strings"),
    (lambda: _tfjob_mwms(service_account="Trainer"), "service_account 'Trainer' is not a valid name"),
    (lambda: _tfjob_mwms(image_pull_secrets=("Reg_Cred",)), "image_pull_secrets entry 'Reg_Cred'"),
    (lambda: _tfjob_mwms(restart_policy="Sometimes"),
     "restart_policy must be one of ['Never', 'OnFailure', 'ExitCode'] with strategy "
     "'multi_worker_mirrored', got 'Sometimes'"),
    (lambda: _tfjob_mwms(overrides={"Launcher": ReplicaOverride()}),
     "override for unknown replica type 'Launcher'"),
    (lambda: _tfjob_mwms(overrides={"PS": ReplicaOverride()}),
     "override for 'PS', but the job has no PS replicas"),
    (lambda: _tfjob_mwms(overrides={"Worker": ReplicaOverride(restart_policy="Retry")}),
     "restart policy 'Retry' of Worker"),
    (lambda: _tfjob_mwms(run_policy=RunPolicy(clean_pod_policy="Some")),
     "clean_pod_policy 'Some' is not valid"),
    (lambda: _tfjob_mwms(active_deadline_seconds=0), "active_deadline_seconds must be"),
    (lambda: _tfjob_mwms(backoff_limit=-1), "backoff_limit must be an integer >= 0"),
    (lambda: _tfjob_mwms(run_policy=RunPolicy(ttl_seconds_after_finished=2 ** 31)),
     "ttl_seconds_after_finished"),
    (lambda: _tfjob_mwms(run_policy=RunPolicy(scheduling_policy=SchedulingPolicy(min_available=5))),
     "min_available must be an integer from 1 to 4, got 5"),
    (lambda: _tfjob_mwms(run_policy=RunPolicy(scheduling_policy=SchedulingPolicy(priority_class="High"))),
     "priority_class 'High'"),
    (lambda: _tfjob_mwms(volumes=(PvcMount("data", "mnt/data"),)), "mount path 'mnt/data' of PVC 'data'"),
    (lambda: _tfjob_mwms(volumes=(PvcMount("Data", "/mnt/data"),)), "PVC claim name 'Data'"),
    (lambda: _tfjob_mwms(volumes=(PvcMount("data", "/mnt", sub_path="../etc"),)), "sub_path '../etc'"),
    (lambda: _tfjob_mwms(volumes=(PvcMount("a", "/mnt"), PvcMount("b", "/mnt"))),
     "two volumes mount at the same path"),
    (lambda: _tfjob_mwms(tolerations=(Toleration(key="gpu", operator="Exists", value="x"),)),
     "with operator 'Exists' must have no value, got 'x'"),
    (lambda: _tfjob_mwms(tolerations=(Toleration(key="gpu", effect="NoRun"),)), "toleration effect 'NoRun'"),
])
def test_bad_input_is_rejected_naming_the_value(make, expected):
    with pytest.raises(InvalidInputError) as err:
        spec = make()
        render_mpijob(spec) if spec.backend == "mpijob" else render_tfjob(spec)
    assert expected in str(err.value)


def test_renderers_refuse_the_other_backend():
    with pytest.raises(InvalidInputError, match="render_tfjob needs backend 'tfjob', got 'mpijob'"):
        render_tfjob(_mpijob())
    with pytest.raises(InvalidInputError, match="render_mpijob needs backend 'mpijob', got 'tfjob'"):
        render_mpijob(_tfjob_mwms())


def test_longest_valid_name_renders():
    spec = _tfjob_ps(name="a" * (63 - len("-evaluator-0")))
    assert len(spec.longest_pod_hostname()) == 63
    assert _crd(TFJOB_V1).validate(render_tfjob(spec).body) == []


# --- deterministic names and run labels -------------------------------------------------------

def test_job_name_for_is_deterministic_valid_and_distinct():
    run = "4c0a5e52-0f5b-4a3e-9d1e-6a1f8f3b2c11"
    name = job_name_for(run, "train-distributed")
    assert name == job_name_for(run, "train-distributed")
    assert re.fullmatch(r"kfdist-train-distributed-[0-9a-f]{8}", name)
    names = {job_name_for(r, t) for r in (run, "run-2", "RUN-2") for t in ("train", "train-2", "Train")}
    assert len(names) == 9
    for task in ("x" * 200, "Train Distributed (GPU)!", "---", "数据", "a.b_c"):
        generated = job_name_for(run, task)
        assert len(generated) <= GENERATED_NAME_MAX and k8s.is_dns1035_label(generated), generated
        # room for the operators' longest pod names
        render_tfjob(_tfjob_ps(name=generated, workers=999))
    assert job_name_for(run, "---").startswith("kfdist-") and job_name_for(run, "---").count("-") == 1
    with pytest.raises(InvalidInputError, match="run_id"):
        job_name_for("", "train")


def test_run_labels_are_valid_label_values():
    labels = run_labels("run with spaces/and:colons" * 4, "train")
    assert labels[RUN_ID_LABEL].startswith("run-with-spaces-and-colons")
    assert all(k8s.is_label_value(v) for v in labels.values())
    assert run_labels("abc", "t") == {RUN_ID_LABEL: "abc", "kfdist.dev/task": "t"}


# --- Kubernetes syntax -----------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("500m", "0.5"), ("2", "2"), ("1.5Gi", str(1.5 * 2 ** 30)), ("1e3", "1000"), ("2k", "2000"),
    ("1E", "1e18"), ("128974848", "128974848"), (".5", "0.5")])
def test_parse_quantity(text, value):
    assert k8s.parse_quantity(text) == decimal.Decimal(value)


@pytest.mark.parametrize("text", ["", "4 cores", "8GB", "1.2.3", "Gi", "1ki", None, 4])
def test_parse_quantity_rejects(text):
    assert k8s.parse_quantity(text) is None


@pytest.mark.parametrize("image, pinned", [
    ("gcr.io/p/t:1.0", True), ("localhost:5000/t:v1", True), ("python:3.11-slim", True),
    ("ghcr.io/kfdist/kfdist-runtime@sha256:" + "a" * 64, True), ("repo/t:latest@sha256:" + "b" * 64, True),
    ("gcr.io/p/t", False), ("t:latest", False), ("localhost:5000/t", False), ("UPPER/t:1", False),
    ("t:", False), ("t@sha256:abc", False), ("t:数据", False), ("gcr.io/p/t:v1 ", False)])
def test_image_pinning(image, pinned):
    assert (k8s.image_error(image) is None) == pinned, k8s.image_error(image)


# --- kfdist render ----------------------------------------------------------------------------

def _parse(argv):
    parser = argparse.ArgumentParser(prog="kfdist")
    render_cmd.add_render_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["render"] + argv)


RENDER_BASE = ["--namespace", "team-a", "--work-uri", "gs://bucket/jobs/x"]


@pytest.mark.parametrize("argv, kind", [
    (["--backend", "tfjob", "--strategy", "multi_worker_mirrored", "--workers", "3", "--chief",
      "--gpus-per-worker", "4", "--cpu-per-worker", "4", "--memory-per-worker", "16Gi"], TFJOB_V1),
    (["--backend", "tfjob", "--strategy", "parameter_server", "--workers", "4", "--ps", "2",
      "--evaluator", "--node-selector", "pool=cpu", "--backoff-limit", "2",
      "--active-deadline-seconds", "600", "--service-account", "trainer"], TFJOB_V1),
    (["--backend", "mpijob", "--strategy", "horovod", "--workers", "4", "--slots-per-worker", "2",
      "--gpus-per-worker", "2"], MPIJOB_V2BETA1),
])
def test_render_command_prints_valid_yaml(argv, kind, capsys):
    args = _parse(RENDER_BASE + argv)
    assert args.func(args) == 0
    body = yaml.safe_load(capsys.readouterr().out)
    assert (body["apiVersion"], body["kind"]) == (kind.api_version, kind.kind)
    assert _crd(kind).validate(body) == []
    assert body["metadata"]["name"] == job_name_for("manual", "train-distributed")
    assert body["metadata"]["namespace"] == "team-a"


def test_rendered_job_mounts_the_pvc_its_work_location_is_on(capsys):
    args = _parse(["--backend", "tfjob", "--namespace", "team-a", "--pvc-name", "kfdist-work",
                   "--work-uri", "/mnt/kfdist/jobs/x"])
    assert args.func(args) == 0
    body = yaml.safe_load(capsys.readouterr().out)
    pod = body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    [volume] = pod["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "kfdist-work"
    [container] = pod["containers"]
    assert container["volumeMounts"][0]["mountPath"] == "/mnt/kfdist"
    assert container["command"][-2:] == ["--work-uri", "/mnt/kfdist/jobs/x"]


@pytest.mark.parametrize("argv, expected", [
    (RENDER_BASE + ["--image", "a/b:latest"], "is tagged ':latest'"),
    (RENDER_BASE + ["--node-selector", "pool"], "'pool' must look like KEY=VALUE"),
    (RENDER_BASE + ["--slots-per-worker", "2"], "slots_per_worker=2 is for strategy horovod only"),
    (RENDER_BASE + ["--backend", "local"], "pass --backend tfjob or mpijob or trainjob, not 'local'"),
    (["--work-uri", "gs://bucket/jobs/x"], "namespace is unknown outside a cluster: pass namespace"),
    (["--namespace", "team-a"], "no shared location for the replicas"),
    (["--namespace", "team-a", "--work-uri", "/data/x"], "pass pvc_name as well"),
    (["--namespace", "team-a", "--work-uri", "/data/x", "--pvc-name", "d"],
     "is not on the PVC 'd', which the replicas mount at /mnt/kfdist"),
])
def test_render_command_rejects_bad_input(argv, expected, capsys):
    base = ["--backend", "tfjob", "--strategy", "multi_worker_mirrored", "--workers", "2"]
    assert render_cmd.main(base + argv) == 2
    assert "kfdist: invalid input: " in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match=re.escape(expected)):
        render_cmd.render_from_args(_parse(base + argv))


def test_render_stage_writes_the_work_files_the_printed_job_reads(gcs_emulator, digits_dataset,
                                                                   tmp_path, capsys):
    """`--stage`: the job.json and the dataset the replicas read are at the work location, so
    applying what is printed runs; the staged job describes the printed job's training."""
    gcs_emulator.create_bucket("render-stage")
    work = "gs://render-stage/jobs/x"
    args = _parse(["--backend", "tfjob", "--namespace", "team-a", "--work-uri", work,
                   "--workers", "3", "--epochs", "7", "--dataset", digits_dataset, "--stage"])
    assert args.func(args) == 0
    body = yaml.safe_load(capsys.readouterr().out)
    [container] = body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert container["command"][-2:] == ["--work-uri", work]
    staged = gcs_emulator.list(work + "/")
    assert f"{work}/job.json" in staged
    assert f"{work}/dataset/metadata.json" in staged
    job = config.JobConfig.read(os.path.join(gcs_emulator.download_dir(work, str(tmp_path / "w")),
                                             "job.json"))
    assert (job.training.epochs, job.job.workers, job.dataset_dir) == (7, 3, f"{work}/dataset")
