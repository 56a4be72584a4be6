"""Pure checks of train_distributed: TF_CONFIG layout, sharding plans, argument validation."""

from __future__ import annotations

import json
import os
import sys

import pytest

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.local import local_backend
from kfdist.components.train_distributed.local import ports as local_ports
from kfdist.components.train_distributed.replica import models
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.job import tf_config
from kfdist.components.train_distributed.job.tf_config import Task


def _workers(n):
    return tf_config.worker_cluster([f"localhost:{4000 + i}" for i in range(n)])


def test_single_worker_gets_no_tf_config():
    assert tf_config.tf_configs(_workers(1)) == [(Task("worker", 0), None)]


@pytest.mark.parametrize("n", [2, 3])
def test_workers_get_operator_layout(n):
    configs = tf_config.tf_configs(_workers(n))
    hosts = [f"localhost:{4000 + i}" for i in range(n)]
    assert [task for task, _ in configs] == [Task("worker", i) for i in range(n)]
    for i, (_, value) in enumerate(configs):
        assert value == {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i},
                         "environment": "cloud"}
        assert json.loads(tf_config.to_env_value(value)) == value


def test_chief_is_worker_0_or_the_chief_replica():
    workers = _workers(2)
    assert tf_config.chief_task(workers) == Task("worker", 0)
    assert tf_config.is_chief(tf_config.tf_config_for(workers, Task("worker", 0)))
    assert not tf_config.is_chief(tf_config.tf_config_for(workers, Task("worker", 1)))
    assert tf_config.is_chief(None)
    mixed = tf_config.build_cluster({"worker": ["w:1"], "chief": ["c:1"], "ps": ["p:1"]})
    assert list(mixed) == ["chief", "worker", "ps"]
    assert tf_config.chief_task(mixed) == Task("chief", 0)
    assert not tf_config.is_chief(tf_config.tf_config_for(mixed, Task("worker", 0)))


def test_tf_config_round_trips_through_the_environment():
    value = tf_config.tf_config_for(_workers(3), Task("worker", 2))
    parsed = tf_config.parse_env({"TF_CONFIG": tf_config.to_env_value(value)})
    assert tf_config.current_task(parsed) == Task("worker", 2)
    assert tf_config.parse_env({}) is None
    with pytest.raises(InvalidInputError, match="malformed TF_CONFIG"):
        tf_config.parse_env({"TF_CONFIG": '{"cluster": {}}'})


def test_unknown_replica_type_and_foreign_task_are_rejected():
    with pytest.raises(InvalidInputError, match="'master'"):
        tf_config.build_cluster({"master": ["m:1"]})
    with pytest.raises(InvalidInputError, match="worker:5"):
        tf_config.tf_config_for(_workers(2), Task("worker", 5))


def test_replica_env(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"stale": true}')
    monkeypatch.syspath_prepend("/some/user/dir")
    single = local_backend.replica_env(None, "/jobs/tmp")
    assert "TF_CONFIG" not in single and single["TMPDIR"] == "/jobs/tmp"
    assert single["TF_USE_LEGACY_KERAS"] == "1"
    assert "/some/user/dir" in single["PYTHONPATH"].split(os.pathsep)
    value = tf_config.tf_config_for(_workers(2), Task("worker", 1))
    assert json.loads(local_backend.replica_env(value, "/jobs/tmp")["TF_CONFIG"]) == value


def test_free_ports_are_distinct():
    ports = local_ports.free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)


DEFAULTS = dict(backend="local", strategy="multi_worker_mirrored", workers=2, model_name="mnist_mlp",
                epochs=5, batch_size_per_replica=64, learning_rate=0.001, seed=42)


def test_defaults_are_valid():
    runtime.validate_training_args(**DEFAULTS)


@pytest.mark.parametrize("change,named", [
    ({"workers": -1}, "workers must be an integer >= 1, got -1"),
    ({"workers": -3}, "got -3"),
    ({"workers": 1000}, "workers=1000"),
    ({"epochs": 0}, "epochs must be an integer >= 1, got 0"),
    ({"batch_size_per_replica": 0}, "batch_size_per_replica"),
    ({"learning_rate": float("nan")}, "learning_rate"),
    ({"seed": -1}, "seed"),
    ({"backend": "slurm"}, "unknown backend 'slurm'; valid backends: ['local', 'tfjob', 'mpijob', 'trainjob']"),
    ({"backend": "mpijob"}, "strategy 'multi_worker_mirrored' is not supported by the 'mpijob' "
                            "backend; valid strategies: ['horovod']"),
    ({"backend": "tfjob", "strategy": "horovod"}, "valid strategies: ['mirrored', "
                                                  "'multi_worker_mirrored', 'parameter_server']"),
    ({"strategy": "allreduce"}, "unknown strategy 'allreduce'; valid strategies: ['mirrored', "
                                "'multi_worker_mirrored', 'parameter_server', 'horovod']"),
    # The combinations that cannot work, each named before anything starts.
    ({"strategy": "horovod", "ps": 2}, "ps=2: parameter servers are used only by strategy "
                                       "parameter_server, not 'horovod'"),
    ({"strategy": "parameter_server", "ps": -1}, "ps must be an integer >= 0, got -1"),
    ({"strategy": "horovod", "evaluator": True}, "strategy horovod cannot run a side-car evaluator"),
    ({"strategy": "horovod", "chief": True}, "strategy horovod has no chief"),
    ({"strategy": "mirrored", "workers": 2}, "strategy mirrored runs on one worker's local "
                                             "devices, got workers=2"),
    ({"strategy": "multi_worker_mirrored", "ps": 1}, "ps=1: parameter servers are used only"),
    ({"slots_per_worker": 2}, "slots_per_worker=2 is for strategy horovod only"),
    ({"strategy": "horovod", "restart_policy": "ExitCode"},
     "restart_policy must be one of ['Never', 'OnFailure'] with strategy 'horovod', got 'ExitCode'"),
    ({"restart_policy": "Sometimes"}, "restart_policy must be one of ['Never', 'OnFailure', "
                                      "'ExitCode']"),
    ({"backoff_limit": -1}, "backoff_limit must be an integer >= 0 or None, got -1"),
    ({"active_deadline_seconds": -5}, "active_deadline_seconds must be a number > 0"),
    ({"success_policy": "AllWorkers"}, "unknown training settings ['success_policy']"),
    ({"input_sharding": "by_file"}, "input_sharding must be one of ['auto', 'file', 'record'], "
                                    "got 'by_file'"),
    ({"steps_per_execution": 0}, "steps_per_execution must be an integer >= 1, got 0"),
    ({"steps_per_execution": 2.5}, "steps_per_execution must be an integer >= 1, got 2.5"),
    ({"gpus": 2}, "unknown training settings ['gpus']"),
    ({"model_name": "resnet"}, "unknown model 'resnet'"),
    ({"model_name": "no_such_pkg_xyz.models:build"}, "module 'no_such_pkg_xyz.models' does not import"),
    ({"model_name": "json:no_such_function"}, "module 'json' has no function 'no_such_function'"),
    ({"model_name": "json:"}, "'package.module:function'"),
])
def test_invalid_arguments_are_named(change, named):
    with pytest.raises(InvalidInputError) as error:
        runtime.validate_training_args(**{**DEFAULTS, **change})
    assert named in str(error.value)


@pytest.mark.parametrize("strategy, workers, policy, ps", [
    ("mirrored", 1, "ExitCode", 0),
    ("multi_worker_mirrored", 2, "ExitCode", 0),
    ("parameter_server", 2, "ExitCode", 1),
    ("horovod", 2, "OnFailure", 0),  # the MPI Operator's launcher default; ExitCode is invalid there
])
def test_each_strategy_runs_with_its_defaults(strategy, workers, policy, ps):
    for unset in ({}, {"restart_policy": None, "ps": None}, {"restart_policy": "", "ps": 0}):
        spec = runtime.build_job(strategy=strategy, **unset).spec
        assert (spec.workers, spec.restart_policy, spec.ps) == (workers, policy, ps)
    chosen = runtime.build_job(strategy=strategy, workers=workers, restart_policy="Never").spec
    assert chosen.restart_policy == "Never"


def test_all_workers_success_is_refused_under_parameter_server():
    spec = config.JobSpec(backend="local", workers=2, ps=1, success_policy="AllWorkers")
    with pytest.raises(InvalidInputError,
                       match="success_policy='AllWorkers' would never be met under parameter_server"):
        spec.validate("parameter_server")


def test_unknown_model_lists_valid_names():
    with pytest.raises(InvalidInputError, match=r"\['image_cnn', 'mnist_cnn', 'mnist_mlp', 'tabular_mlp'\] or a user model"):
        models.resolve_model("lenet")


def test_user_module_import_error_is_reported(tmp_path, monkeypatch):
    (tmp_path / "broken_user_models.py").write_text("import does_not_exist_abc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidInputError, match="does_not_exist_abc"):
        models.resolve_model("broken_user_models:build")
    sys.modules.pop("broken_user_models", None)


def _meta(shape=(28, 28), key=ds.IMAGE_KEY, shards=2):
    infos = tuple(ds.ShardInfo(f"train/s{i}", 10, "0", 100) for i in range(shards))
    return ds.DatasetMetadata(
        source_uri="x", source_format="csv", feature=ds.FeatureSpec(key, "uint8", shape),
        num_classes=10, preprocessing=ds.Preprocessing("scale", 1 / 255, 0.0), compression=None,
        seed=0, eval_fraction=0.2, splits={"train": ds.SplitInfo(10 * shards, infos)})


def test_mnist_models_need_28x28_images():
    models.check_compatible("mnist_mlp", _meta())
    with pytest.raises(InvalidInputError, match=r"'mnist_cnn' needs a 28x28 'image'.*\[13\]"):
        models.check_compatible("mnist_cnn", _meta(shape=(13,), key=ds.FEATURES_KEY))


def test_shard_plans_by_file_then_by_record():
    from kfdist.components.train_distributed.replica import input_pipeline

    by_file = input_pipeline.plan_shards(_meta(shards=4), "/d", "train", 2, 1)
    assert by_file.mode == "file" and by_file.files == ["/d/train/s1", "/d/train/s3"]
    by_record = input_pipeline.plan_shards(_meta(shards=2), "/d", "train", 3, 2)
    assert by_record.mode == "record" and len(by_record.files) == 2
    assert "by record" in by_record.describe()
    with pytest.raises(InvalidInputError, match="fewer than one global batch"):
        input_pipeline.steps_per_epoch(_meta(shards=1), 64)


def test_a_split_smaller_than_one_global_batch_trains_with_the_batch_that_makes_one_step():
    from kfdist.components.train_distributed.job.strategy_rules import batch_for_split

    assert batch_for_split(120, 64, 2) == 60  # 160 images, 40 held out, 2 workers
    assert batch_for_split(128, 64, 2) == 64 and batch_for_split(5000, 64, 3) == 64
    assert batch_for_split(3, 64, 3) == 1
    with pytest.raises(InvalidInputError, match=r"has 2 example\(s\), fewer than the job's 3 "
                                                r"training processes; workers must be fewer"):
        batch_for_split(2, 64, 3)


def test_job_config_round_trips(tmp_path):
    job = config.JobConfig("/d", "/m", "/w",
                           config.TrainingConfig("mnist_mlp", 5, 64, 0.001, 42, "multi_worker_mirrored"),
                           config.JobSpec("local", 2), dump_weights=True)
    job.write(str(tmp_path / "job.json"))
    assert config.JobConfig.read(str(tmp_path / "job.json")) == job


def test_train_validates_before_starting(digits_dataset, tmp_path):
    (tmp_path / "model" / "old").mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="is not empty"):
        runtime.train(digits_dataset, str(tmp_path / "model"), log=lambda line: None)
    with pytest.raises(InvalidInputError, match="metadata.json is missing"):
        runtime.train(str(tmp_path / "nothing"), str(tmp_path / "m2"), log=lambda line: None)
    with pytest.raises(InvalidInputError, match="workers must be"):
        runtime.train(digits_dataset, str(tmp_path / "m4"), workers=-2, log=lambda line: None)
    assert not (tmp_path / "m2").exists() and not (tmp_path / "m4").exists()
