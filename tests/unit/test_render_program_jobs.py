"""Launch's PyTorchJob and TFJob, validated against the Training Operator v1.9 CRDs."""

import json
import re

import pytest

from fakes import crd_schema
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TFJOB_V1
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.launch_program.program_pod import ProgramPlacement
from kfdist.components.launch_program.render_program_tfjob import render_program_tfjob
from kfdist.components.launch_program.render_pytorchjob import render_pytorchjob
from kfdist.components.train_distributed.kubernetes.build.job_parts import Resources

CRD = "pytorchjobs.kubeflow.org.v1.training-operator-v1.9.yaml"
PLACEMENT = ProgramPlacement("ddp-run", "team-a", "registry.example/ddp@sha256:" + "0" * 64)


#: What Trainer's torch-distributed runtime fixes for every TrainJob on it.
TRAINJOB_POLICY = dict(restart_policy="OnFailure", backoff_limit=6)


def _job(**changes):
    fields = dict(framework="pytorch", command=("torchrun", "train.py"), workers=3,
                  procs_per_worker=2, model_dir="gs://b/run/model", checkpoint_dir="gs://b/run/ckpt",
                  data_dir="gs://b/data", backoff_limit=2, active_deadline_seconds=600.0)
    fields.update(changes)
    return ProgramJob(**fields)


def test_pytorchjob_has_zero_schema_errors_and_the_operators_layout():
    rendered = render_pytorchjob(_job(), PLACEMENT)
    assert crd_schema.load_crd(crd_schema.crd_path(CRD)).validate(rendered.body) == []
    spec = rendered.body["spec"]
    assert {t: r["replicas"] for t, r in spec["pytorchReplicaSpecs"].items()} == {"Master": 1, "Worker": 2}
    assert spec["nprocPerNode"] == "2"
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 2,
                                 "activeDeadlineSeconds": 600}
    container = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch" and container["command"] == ["torchrun", "train.py"]
    assert container["ports"][0]["name"] == "pytorchjob-port"
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "KFDIST_MODEL_DIR": "gs://b/run/model", "KFDIST_CHECKPOINT_DIR": "gs://b/run/ckpt",
        "KFDIST_DATA_DIR": "gs://b/data"}
    assert rendered.label_selector().endswith("replica-index=0,training.kubeflow.org/replica-type=master")


def test_a_single_node_job_is_a_master_alone():
    spec = render_pytorchjob(_job(workers=1), PLACEMENT).body["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Master"]


def test_misplaced_field_is_caught_by_the_schema():
    body = render_pytorchjob(_job(), PLACEMENT).body
    body["spec"]["backoffLimit"] = body["spec"]["runPolicy"].pop("backoffLimit")  # pruned there
    assert crd_schema.load_crd(crd_schema.crd_path(CRD)).validate(body)


@pytest.mark.parametrize("job, placement, expected", [
    (_job(framework="tensorflow", procs_per_worker=1), PLACEMENT, "framework 'pytorch'"),
    (_job(), ProgramPlacement("DDP_run", "team-a", "img"), "'DDP_run' is not a DNS-1035 label"),
    (_job(ps=1), PLACEMENT, "--ps"),
])
def test_bad_input_is_refused_naming_the_value(job, placement, expected):
    with pytest.raises(InvalidInputError, match=expected):
        render_pytorchjob(job, placement)


def test_program_tfjob_has_zero_schema_errors_and_the_layout_asked():
    job = _job(framework="tensorflow", procs_per_worker=1, workers=2, ps=1, chief=True,
               command=("python", "train.py"))
    rendered = render_program_tfjob(job, PLACEMENT)
    assert crd_schema.load_crd(crd_schema.crd_path_for(TFJOB_V1)).validate(rendered.body) == []
    specs = rendered.body["spec"]["tfReplicaSpecs"]
    assert {t: r["replicas"] for t, r in specs.items()} == {"Chief": 1, "Worker": 2, "PS": 1}
    container = specs["PS"]["template"]["spec"]["containers"][0]
    assert container["name"] == "tensorflow" and container["command"] == ["python", "train.py"]
    assert container["ports"][0]["name"] == "tfjob-port"
    assert rendered.log_pod_selector["training.kubeflow.org/replica-type"] == "chief"
    with pytest.raises(InvalidInputError, match="framework 'tensorflow'"):
        render_program_tfjob(_job(), PLACEMENT)


@pytest.mark.parametrize("render, framework", [(render_pytorchjob, "pytorch"),
                                               (render_program_tfjob, "tensorflow")])
def test_directories_on_a_pvc_are_mounted_and_made_before_the_program(render, framework):
    placement = ProgramPlacement("ddp-run", "team-a", "registry.example/ddp:1.0", "team-work")
    job = _job(framework=framework, procs_per_worker=1, workers=2, data_dir=None,
               model_dir="/mnt/kfdist/run/model", checkpoint_dir="/mnt/kfdist/run/ckpt")
    body = render(job, placement).body
    kind = "PyTorchJob" if framework == "pytorch" else "TFJob"
    path = crd_schema.crd_path(CRD) if kind == "PyTorchJob" else crd_schema.crd_path_for(TFJOB_V1)
    assert crd_schema.load_crd(path).validate(body) == []
    specs = body["spec"]["pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"]
    for replica in specs.values():
        pod = replica["template"]["spec"]
        assert pod["volumes"] == [{"name": "kfdist-pvc",
                                   "persistentVolumeClaim": {"claimName": "team-work"}}]
        container = pod["containers"][0]
        assert container["volumeMounts"] == [{"name": "kfdist-pvc", "mountPath": "/mnt/kfdist"}]
        assert container["command"][:2] == ["/bin/sh", "-c"]
        assert container["command"][4:] == ["torchrun", "train.py"]


@pytest.mark.parametrize("placement, location, expected", [
    (ProgramPlacement("a", "ns", "i:1"), "/data/run", "pass a gs://, s3:// or minio:// URI, "
                                                       "or a path under /mnt/kfdist/ with "
                                                       "--pvc-name CLAIM"),
    (ProgramPlacement("a", "ns", "i:1", "work"), "/mnt/kfdistx/run", "'/mnt/kfdistx/run' is not"),
    (ProgramPlacement("a", "ns", "i:1", "work"), "/mnt/kfdist/../etc", "is not where"),
])
def test_a_directory_the_replicas_cannot_reach_is_refused(placement, location, expected):
    with pytest.raises(InvalidInputError, match=expected.replace("(", r"\(")):
        placement.check_location("--output", location)
    ProgramPlacement("a", "ns", "i:1").check_location("--output", "gs://b/run")
    ProgramPlacement("a", "ns", "i:1", "work").check_location("--output", "/mnt/kfdist/run")


@pytest.mark.parametrize("customisation, crd_file", [
    ("runtimePatches", "trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml"),
    ("podTemplateOverrides", crd_schema.TRAINJOB_V2_1_CRD)])
def test_program_trainjob_on_torch_distributed_is_valid_for_each_trainer(customisation, crd_file):
    from kfdist.components.launch_program.render_program_trainjob import render_program_trainjob

    placement = ProgramPlacement("ddp-run", "team-a", "registry.example/ddp:1.0", "team-work")
    job = _job(model_dir="/mnt/kfdist/run/model", checkpoint_dir="/mnt/kfdist/run/ckpt",
               active_deadline_seconds=None, **TRAINJOB_POLICY)
    rendered = render_program_trainjob(job, placement, customisation)
    assert crd_schema.load_crd(crd_schema.crd_path(crd_file)).validate(rendered.body) == []
    spec = rendered.body["spec"]
    assert spec["runtimeRef"]["name"] == "torch-distributed"
    trainer = spec["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (3, 2)
    assert trainer["command"][4:] == ["torchrun", "train.py"]
    # Trainer refuses the torchrun variables in trainer.env (its webhook): kfdist sets none.
    assert not [e for e in trainer["env"] if e["name"].startswith("PET_")]
    assert "volumes" in json.dumps(spec[customisation])


def test_a_tensorflow_trainjob_derives_tf_config_in_kfdists_entry():
    from kfdist.components.launch_program.render_program_trainjob import render_program_trainjob

    job = _job(framework="tensorflow", procs_per_worker=1, workers=2, ps=1, chief=True,
               command=("python", "train.py"), active_deadline_seconds=None, backoff_limit=6)
    rendered = render_program_trainjob(job, PLACEMENT)
    crd = crd_schema.load_crd(crd_schema.crd_path(
        "trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml"))
    assert crd.validate(rendered.body) == []
    spec = rendered.body["spec"]
    assert spec["runtimeRef"]["name"] == "kfdist-tensorflow"
    assert spec["trainer"]["numNodes"] == 4 and "numProcPerNode" not in spec["trainer"]
    assert spec["trainer"]["command"] == [
        "python", "-m", "kfdist.components.launch_program.pod_entry", "--tf-layout",
        '{"chief":1,"worker":2,"ps":1}', "--", "python", "train.py"]


def test_program_mpijob_runs_mpirun_over_every_slot_with_sshd_workers():
    from kfdist import HOROVOD_IMAGE
    from kfdist.components.launch_program.render_program_mpijob import render_program_mpijob
    from kfdist.components.train_distributed.kubernetes.build.job_kinds import MPIJOB_V2BETA1

    job = _job(framework="tensorflow", mpi=True, workers=2, procs_per_worker=2,
               restart_policy="OnFailure", command=("python", "train.py"))
    rendered = render_program_mpijob(job, ProgramPlacement("hvd", "team-a", HOROVOD_IMAGE))
    assert crd_schema.load_crd(crd_schema.crd_path_for(MPIJOB_V2BETA1)).validate(rendered.body) == []
    spec = rendered.body["spec"]
    assert (spec["slotsPerWorker"], spec["sshAuthMountPath"]) == (2, "/home/mpiuser/.ssh")
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:3] == ["mpirun", "-np", "4"]
    assert launcher["command"][-2:] == ["python", "train.py"]
    for name in ("KFDIST_MODEL_DIR", "KFDIST_CHECKPOINT_DIR", "KFDIST_DATA_DIR"):
        assert launcher["command"][launcher["command"].index(name) - 1] == "-x"
    assert "command" not in worker  # the operator runs sshd
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert rendered.log_pod_selector["training.kubeflow.org/job-role"] == "launcher"


@pytest.mark.parametrize("changes, expected", [
    (dict(mpi=True, restart_policy="ExitCode"), "valid: ['Never', 'OnFailure']"),
    (dict(mpi=True, ps=1, restart_policy="OnFailure"), "ranks: use --workers and --procs"),
])
def test_bad_mpi_programs_are_refused(changes, expected):
    with pytest.raises(InvalidInputError, match=re.escape(expected)):
        _job(framework="tensorflow", procs_per_worker=1, **changes).validate()


SCHEDULED = ProgramPlacement(
    "sched", "team-a", "registry.example/train:1.0", "team-work",
    resources=Resources(cpu="4", memory="8Gi", cpu_limit="4", memory_limit="8Gi", gpus=2),
    node_selector={"pool": "gpu"}, service_account="trainer",
    labels={"kueue.x-k8s.io/queue-name": "team-q"})


def _pods(body):
    """Every pod spec of a rendered job (a TrainJob's patch, or each replica type's)."""
    spec = body["spec"]
    for key in ("tfReplicaSpecs", "pytorchReplicaSpecs", "mpiReplicaSpecs"):
        for replica_type, replica in spec.get(key, {}).items():
            yield replica_type, replica["template"]["spec"]


@pytest.mark.parametrize("kind", ["tfjob", "pytorchjob", "mpijob", "trainjob", "trainjob-v2.1"])
def test_cluster_options_reach_every_replica_and_every_crd_keeps_them(kind):
    """GPUs on the replicas that compute (not on a PS or an MPI launcher), CPU and memory,
    node selector, service account and Kueue's queue label, none pruned by the CRD."""
    from kfdist.components.launch_program.render_program_mpijob import render_program_mpijob
    from kfdist.components.launch_program.render_program_trainjob import render_program_trainjob

    paths = dict(model_dir="/mnt/kfdist/r/model", checkpoint_dir="/mnt/kfdist/r/ckpt",
                 active_deadline_seconds=None)
    if kind == "tfjob":
        rendered = render_program_tfjob(_job(framework="tensorflow", procs_per_worker=1, ps=1,
                                             **paths), SCHEDULED)
        crd = crd_schema.crd_path_for(TFJOB_V1)
    elif kind == "pytorchjob":
        rendered, crd = render_pytorchjob(_job(**paths), SCHEDULED), crd_schema.crd_path(CRD)
    elif kind == "mpijob":
        rendered = render_program_mpijob(_job(mpi=True, restart_policy="OnFailure", **paths),
                                         SCHEDULED)
        crd = crd_schema.crd_path_for(rendered.kind)
    else:
        v21 = kind.endswith("v2.1")
        rendered = render_program_trainjob(
            _job(**paths, **TRAINJOB_POLICY), SCHEDULED, "podTemplateOverrides" if v21 else "runtimePatches")
        crd = crd_schema.crd_path(crd_schema.TRAINJOB_V2_1_CRD if v21 else
                                  "trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml")
    body = rendered.body
    assert crd_schema.load_crd(crd).validate(body) == []
    assert body["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-q"}
    if kind.startswith("trainjob"):
        assert body["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == 2
        text = json.dumps(body["spec"])
        assert '"nodeSelector": {"pool": "gpu"}' in text
        assert '"serviceAccountName": "trainer"' in text
        return
    pods = dict(_pods(body))
    for replica_type, pod in pods.items():
        assert pod["nodeSelector"] == {"pool": "gpu"} and pod["serviceAccountName"] == "trainer"
        resources = pod["containers"][0].get("resources", {})
        computes = replica_type not in ("PS", "Launcher")
        assert ("nvidia.com/gpu" in resources.get("limits", {})) == computes, replica_type
        if replica_type != "Launcher":
            assert resources["requests"] == {"cpu": "4", "memory": "8Gi"}, replica_type


def test_bad_cluster_options_are_refused_naming_them():
    import dataclasses

    for changes, expected in [
            (dict(resources=Resources(cpu="4x")), "cpu '4x' is not a positive Kubernetes quantity"),
            (dict(node_selector={"bad key!": "x"}), "node_selector key 'bad key!'"),
            (dict(service_account="Trainer_1"), "service_account 'Trainer_1'")]:
        with pytest.raises(InvalidInputError, match=re.escape(expected)):
            render_pytorchjob(_job(), dataclasses.replace(PLACEMENT, **changes))


@pytest.mark.parametrize("customisation, crd_file", [
    ("runtimePatches", "trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml"),
    ("podTemplateOverrides", crd_schema.TRAINJOB_V2_1_CRD)])
def test_kfdists_image_runs_as_its_non_root_user_where_the_trainjob_can_say_so(customisation,
                                                                                crd_file):
    """v2.3's runtimePatches carry kfdist's security context; v2.1's podTemplateOverrides
    cannot (kfdist's own runtime sets it there), so it is left out rather than pruned."""
    import dataclasses

    from kfdist import RUNTIME_IMAGE
    from kfdist.components.launch_program.render_program_trainjob import render_program_trainjob

    placement = dataclasses.replace(SCHEDULED, image=RUNTIME_IMAGE)
    rendered = render_program_trainjob(_job(model_dir="gs://b/m", active_deadline_seconds=None,
                                            **TRAINJOB_POLICY), placement, customisation)
    assert crd_schema.load_crd(crd_schema.crd_path(crd_file)).validate(rendered.body) == []
    assert ('"runAsNonRoot": true' in json.dumps(rendered.body)) == (customisation == "runtimePatches")


@pytest.mark.parametrize("changes, expected", [
    (dict(restart_policy="ExitCode", backoff_limit=6),
     "restart policy 'ExitCode': a TrainJob's replicas follow its runtime torch-distributed, "
     "whose policy is 'OnFailure'"),
    (dict(restart_policy="OnFailure", backoff_limit=2),
     "backoff limit 2: a TrainJob takes its runtime torch-distributed's (6)"),
    (dict(framework="tensorflow", procs_per_worker=1, restart_policy="OnFailure", backoff_limit=6),
     "runtime kfdist-tensorflow, whose policy is 'ExitCode'"),
])
def test_a_trainjob_refuses_what_its_runtime_fixes_instead_of_ignoring_it(changes, expected):
    from kfdist.components.launch_program.render_program_trainjob import render_program_trainjob

    with pytest.raises(InvalidInputError, match=re.escape(expected)):
        render_program_trainjob(_job(**changes), PLACEMENT)
