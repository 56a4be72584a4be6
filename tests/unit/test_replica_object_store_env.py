"""Every replica of a cluster job reaches the S3 store the step reaches: when the job's work
location or dataset is on `s3://` or `minio://`, each replica container gets the step's
endpoint and region variables as values and the store's keys by reference to the Secret
`object_store_secret` names (optional), never the keys themselves; nothing where no S3 location
is used. Rendered by the steps' own code paths (`train_distributed`: TFJob, MPIJob, TrainJob;
`train_program`: TFJob, PyTorchJob, MPIJob, TrainJob), and checked against the operators' CRDs."""

from __future__ import annotations

import dataclasses

import pytest

from kfdist.components.launch_program import program_cluster, program_pod
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.kubernetes import backend
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

from fakes import crd_schema

STEP_ENV = {"AWS_ENDPOINT_URL": "http://seaweedfs.kubeflow:9000", "AWS_REGION": "eu-west-1",
            "AWS_ACCESS_KEY_ID": "the-access-key", "AWS_SECRET_ACCESS_KEY": "the-secret-key",
            "HOME": "/home/kfdist"}
KEYS = [{"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {
            "name": "store-keys", "key": "accesskey", "optional": True}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {
            "name": "store-keys", "key": "secretkey", "optional": True}}}]
VALUES = [{"name": "AWS_ENDPOINT_URL", "value": "http://seaweedfs.kubeflow:9000"},
          {"name": "AWS_REGION", "value": "eu-west-1"}]
JOBS = {
    "tfjob, parameter server": dict(backend="tfjob", strategy="parameter_server", workers=2, ps=1,
                                    evaluator=True),
    "tfjob, chief": dict(backend="tfjob", strategy="multi_worker_mirrored", workers=2, chief=True),
    "mpijob, horovod": dict(backend="mpijob", strategy="horovod", workers=2),
    "trainjob, all-reduce": dict(backend="trainjob", strategy="multi_worker_mirrored", workers=3),
    "trainjob, horovod": dict(backend="trainjob", strategy="horovod", workers=2),
}


def render(dataset_uri=None, environ=STEP_ENV, **args):
    step = runtime.build_job(run_id="run-1", task_name="train", namespace="team-a", **args)
    job = config.JobConfig(dataset_dir="dataset", model_dir="model", work_dir="reports",
                           training=step.training, job=step.spec)
    rendered = backend.render_step_job(job, step.cluster, dataset_uri, environ=environ)[0]
    assert crd_schema.load_crd(crd_schema.crd_path_for(rendered.kind)).validate(rendered.body) == []
    return rendered


def replica_envs(rendered):
    """(replica, its container's env, its container's command) for every replica type."""
    spec = rendered.body["spec"]
    if rendered.kind == TRAINJOB_V1ALPHA1:  # the trainer's env reaches every node (and launcher)
        yield "trainer", spec["trainer"].get("env", []), spec["trainer"].get("command", [])
        return
    for key in ("tfReplicaSpecs", "mpiReplicaSpecs", "pytorchReplicaSpecs"):
        for name, replica in spec.get(key, {}).items():
            container = replica["template"]["spec"]["containers"][0]
            yield name, container.get("env", []), container.get("command", [])


#: The jobs of `train_program` (your own program), by backend.
PROGRAMS = {"tfjob": dict(framework="tensorflow", ps=1, chief=True),
            "pytorchjob": dict(framework="pytorch"),
            "mpijob": dict(framework="tensorflow", mpi=True, restart_policy="OnFailure"),
            "trainjob": dict(framework="pytorch", restart_policy="OnFailure")}


def render_program(backend_name, work, secret, environ=STEP_ENV, **job_args):
    """The job `train_program` creates, its placement as the step makes it."""
    options = ClusterOptions(namespace="team-a", work_uri=work, object_store_secret=secret)
    job = ProgramJob(command=("python", "/app/train.py"), workers=2,
                     model_dir=f"{work}/model", checkpoint_dir=f"{work}/ckpt",
                     data_dir=f"{work}/dataset", env={"AWS_REGION": "set-by-env-flag"},
                     **job_args)
    placement = program_pod.placement_for("kfdist-train-0123abcd", options.image_for(
        "horovod" if job.mpi else "multi_worker_mirrored"), options)
    placement = dataclasses.replace(placement, store_env=program_pod.store_env_for(
        placement, options, (options.work_uri, job.data_dir), environ))
    rendered = program_cluster.render(job, backend_name, placement)
    assert crd_schema.load_crd(crd_schema.crd_path_for(rendered.kind)).validate(rendered.body) == []
    return rendered


@pytest.mark.parametrize("job", JOBS.values(), ids=list(JOBS))
@pytest.mark.parametrize("where", ["work_uri", "dataset"])
def test_every_replica_gets_the_endpoint_region_and_keys_by_reference(job, where):
    place = (dict(work_uri="minio://mlpipeline/work") if where == "work_uri" else
             dict(work_uri="gs://bucket/work", dataset_uri="s3://data/runs/1/dataset"))
    rendered = render(object_store_secret="store-keys", **job, **place)
    assert "the-secret-key" not in str(rendered.body) and "the-access-key" not in str(rendered.body)
    replicas = list(replica_envs(rendered))
    assert replicas
    for replica, env, command in replicas:
        assert env == VALUES + KEYS, replica
        if "-genvlist" in command:  # ranks started over SSH get them from the launcher
            forwarded = command[command.index("-genvlist") + 1].split(",")
            assert {e["name"] for e in VALUES + KEYS} <= set(forwarded), replica


@pytest.mark.parametrize("job", JOBS.values(), ids=list(JOBS))
def test_no_s3_location_and_no_secret_gives_nothing(job):
    for secret in ("", "store-keys"):
        rendered = render(object_store_secret=secret, work_uri="gs://bucket/work",
                          dataset_uri="gs://bucket/dataset", **job)
        for replica, env, _ in replica_envs(rendered):
            assert not [e for e in env if e["name"].startswith("AWS_")], replica


@pytest.mark.parametrize("job", JOBS.values(), ids=list(JOBS))
def test_an_empty_secret_gives_only_what_the_step_has_set(job):
    rendered = render(object_store_secret="", work_uri="s3://bucket/work",
                      environ={"AWS_DEFAULT_REGION": "us-west-2"}, **job)
    for replica, env, _ in replica_envs(rendered):
        assert env == [{"name": "AWS_DEFAULT_REGION", "value": "us-west-2"}], replica


def test_the_step_default_is_kubeflow_pipelines_own_secret():
    rendered = render(work_uri="minio://mlpipeline/work", environ={}, backend="tfjob",
                      strategy="multi_worker_mirrored", workers=2)
    for replica, env, _ in replica_envs(rendered):
        assert [e["valueFrom"]["secretKeyRef"]["name"] for e in env] == [
            "mlpipeline-minio-artifact"] * 2, replica


@pytest.mark.parametrize("backend_name", sorted(PROGRAMS))
def test_every_program_replica_gets_the_endpoint_and_keys_by_reference(backend_name):
    rendered = render_program(backend_name, "minio://mlpipeline/work", "store-keys",
                              **PROGRAMS[backend_name])
    assert "the-secret-key" not in str(rendered.body) and "the-access-key" not in str(rendered.body)
    replicas = list(replica_envs(rendered))
    assert replicas
    for replica, env, command in replicas:
        store = [e for e in env if e["name"].startswith("AWS_")]
        # The job's own --env AWS_REGION wins over the step's.
        assert store == [{"name": "AWS_REGION", "value": "set-by-env-flag"}, VALUES[0], *KEYS], \
            replica
        if "-genvlist" in command or "-x" in command:  # ranks over SSH get them from mpirun
            assert all(e["name"] in " ".join(command) for e in store), replica


@pytest.mark.parametrize("backend_name", sorted(PROGRAMS))
def test_a_program_without_s3_gets_nothing(backend_name):
    rendered = render_program(backend_name, "gs://bucket/work", "store-keys",
                              **PROGRAMS[backend_name])
    for replica, env, _ in replica_envs(rendered):
        assert [e["name"] for e in env if e["name"].startswith("AWS_")] == ["AWS_REGION"], replica
