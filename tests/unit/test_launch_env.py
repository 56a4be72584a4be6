"""`kfdist launch --env NAME=VALUE`: the variable reaches every replica container of every
cluster backend's job (each valid against its CRD), and a bad value is refused in one line."""

import subprocess
import sys

import pytest

from fakes import crd_schema
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.launch_program import program_cluster
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.launch_program.program_pod import ProgramPlacement, default_job_name
from kfdist.components.launch_program.user_env import parse_env_flags
from kfdist.components.train_distributed.kubernetes.build.render_trainjob import (
    POD_TEMPLATE_OVERRIDES, RUNTIME_PATCHES)

ENV = {"TF_USE_LEGACY_KERAS": "1", "DATA_SEED": "a=b c"}
PLACEMENT = ProgramPlacement("env-run", "team-a", "registry.example/train:1.0")
TRAINJOB_CRDS = {RUNTIME_PATCHES: "trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml",
                 POD_TEMPLATE_OVERRIDES: crd_schema.TRAINJOB_V2_1_CRD}


def _job(framework="tensorflow", **changes):
    fields = dict(framework=framework, command=("python", "train.py"), workers=2,
                  model_dir="gs://b/run/model", checkpoint_dir="gs://b/run/ckpt", env=ENV)
    fields.update(changes)
    return ProgramJob(**fields)


def _containers(body):
    """`(replica type, container)` of every replica of a Training Operator or MPI job."""
    spec = body["spec"]
    for key in ("tfReplicaSpecs", "pytorchReplicaSpecs", "mpiReplicaSpecs"):
        for replica_type, replica in spec.get(key, {}).items():
            for container in replica["template"]["spec"]["containers"]:
                yield replica_type, container


def _env(container):
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.mark.parametrize("backend, job, replica_types", [
    ("tfjob", _job(chief=True, ps=1, evaluator=True), {"Chief", "Worker", "PS", "Evaluator"}),
    ("pytorchjob", _job("pytorch", workers=3), {"Master", "Worker"}),
    ("mpijob", _job(mpi=True, restart_policy="OnFailure"), {"Launcher", "Worker"}),
])
def test_every_replica_container_carries_the_variables(backend, job, replica_types):
    rendered = program_cluster.render(job, backend, PLACEMENT)
    assert crd_schema.load_crd(crd_schema.crd_path_for(rendered.kind)).validate(rendered.body) == []
    seen = set()
    for replica_type, container in _containers(rendered.body):
        seen.add(replica_type)
        env = _env(container)
        assert {k: env.get(k) for k in ENV} == ENV, replica_type
        assert env["KFDIST_MODEL_DIR"] == "gs://b/run/model", replica_type  # beside kfdist's own
    assert seen == replica_types


def test_mpirun_forwards_the_variables_to_the_ranks_it_starts():
    rendered = program_cluster.render(_job(mpi=True, restart_policy="OnFailure"), "mpijob",
                                      PLACEMENT)
    launcher = rendered.body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    command = launcher["containers"][0]["command"]
    for name in ENV:
        assert command[command.index(name) - 1] == "-x", command


@pytest.mark.parametrize("customisation", sorted(TRAINJOB_CRDS))
@pytest.mark.parametrize("framework", ["tensorflow", "pytorch"])
def test_a_trainjob_carries_the_variables_to_every_node(framework, customisation):
    job = _job(framework, restart_policy="ExitCode" if framework == "tensorflow" else "OnFailure")
    rendered = program_cluster.render(job, "trainjob", PLACEMENT, customisation)
    crd = crd_schema.crd_path(TRAINJOB_CRDS[customisation])
    assert crd_schema.load_crd(crd).validate(rendered.body) == []
    # Trainer sets `trainer.env` in the container of every node of the TrainJob.
    env = _env(rendered.body["spec"]["trainer"])
    assert {k: env.get(k) for k in ENV} == ENV


def test_another_env_is_another_job_name_and_no_env_keeps_the_name_it_had():
    # The name a job without --env had before --env existed: its rerun re-attaches to it.
    assert default_job_name(_job(env={})) == "kfdist-tf-cc8e79998267"
    assert default_job_name(_job()) != default_job_name(_job(env={"TF_USE_LEGACY_KERAS": "0"}))
    assert default_job_name(_job(env={})) != default_job_name(_job())


def test_the_last_of_a_repeated_name_wins_and_values_keep_their_equals_signs():
    assert parse_env_flags(["A=1", "B=x=y", "A=2", "EMPTY="]) == {"A": "2", "B": "x=y",
                                                                 "EMPTY": ""}
    assert parse_env_flags(None) == {}


@pytest.mark.parametrize("value, expected", [
    ("TF_USE_LEGACY_KERAS", "--env 'TF_USE_LEGACY_KERAS' has no '=': give NAME=VALUE"),
    ("=1", "--env '=1' has an empty name"),
    ("1X=1", "--env '1X=1': '1X' is not a variable name"),
    ("MY-VAR=1", "--env 'MY-VAR=1': 'MY-VAR' is not a variable name"),
    ("TF_CONFIG={}", "--env 'TF_CONFIG={}': TF_CONFIG is set by the operator or kfdist"),
    ("RANK=3", "--env 'RANK=3': RANK is set by the operator or kfdist"),
    ("KFDIST_MODEL_DIR=/x", "--env 'KFDIST_MODEL_DIR=/x': KFDIST_MODEL_DIR is set by the"),
])
def test_a_bad_env_value_is_refused_naming_it(value, expected):
    with pytest.raises(InvalidInputError) as refused:
        parse_env_flags([value])
    assert str(refused.value).startswith(expected), str(refused.value)


def test_the_command_line_refuses_a_bad_env_in_one_line_before_anything_is_written(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "launch", "--output", str(tmp_path / "out"),
         "--env", "OK=1", "--env", "NO_EQUALS", "--", sys.executable, "-c", "pass"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "kfdist: invalid input: --env 'NO_EQUALS' has no '=': give NAME=VALUE, e.g. "
        "--env TF_USE_LEGACY_KERAS=1"]
    assert not (tmp_path / "out").exists()


def test_the_command_line_refuses_an_operators_variable_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "launch", "--output", str(tmp_path / "out"),
         "--env", "RANK=3", "--", sys.executable, "-c", "pass"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("kfdist: invalid input: --env 'RANK=3': RANK is set by the operator")
    assert not (tmp_path / "out").exists()
