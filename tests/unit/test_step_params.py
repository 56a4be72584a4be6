"""The training step's parameters are defined once (`job.step_params`): every place that
takes them agrees with that definition, names and defaults included."""

from __future__ import annotations

import argparse
import inspect

import pytest
from kfp import dsl

from kfdist import cli
from kfdist.components.train_distributed.component import train_distributed
from kfdist.components.train_distributed.job import step_params
from kfdist.components.train_distributed.kubernetes.task_settings import TASK_CONFIG_PARAM
from kfdist.local_run import RunOptions, pipeline_training_params
from kfdist.pipelines import registry
from kfdist.step_flags import step_values

ARTIFACTS = ("dataset", "model", "metrics")


def test_the_component_takes_exactly_the_step_parameters_in_order_with_their_defaults():
    signature = inspect.signature(train_distributed.python_func).parameters
    # Last, the TaskConfig KFP fills (`kubernetes.task_settings`): no step parameter.
    *params, task_config = [p for name, p in signature.items() if name not in ARTIFACTS]
    assert (task_config.name, task_config.annotation) == (TASK_CONFIG_PARAM, dsl.TaskConfig)
    assert [p.name for p in params] == [p.name for p in step_params.TRAIN_STEP_PARAMS]
    for declared, defined in zip(params, step_params.TRAIN_STEP_PARAMS):
        assert declared.default == defined.default, declared.name
        assert isinstance(declared.default, type(defined.default)), declared.name


def test_the_component_documents_every_parameter():
    doc = train_distributed.python_func.__doc__
    for param in step_params.TRAIN_STEP_PARAMS:
        assert f"\n        {param.name}: " in doc, param.name


@pytest.mark.parametrize("name", registry.PIPELINE_NAMES)
def test_the_pipeline_training_parameters_default_as_the_step_does(name):
    signature = inspect.signature(registry.get_pipeline(name).pipeline_func).parameters
    shared = pipeline_training_params()
    own = registry.get_definition(name).train_defaults
    assert {"backend", "strategy", "workers", "epochs", "ps", "restart_policy"} <= set(shared)
    for param_name in shared:
        param = step_params.PARAMS_BY_NAME[param_name]
        expected = param.default if param.pipeline_default is None else param.pipeline_default
        assert signature[param_name].default == own.get(param_name, expected), param_name
    # On a cluster the pipeline picks the backend; locally `kfdist run` passes `local`.
    assert signature["backend"].default == "auto"


def _subcommand(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


@pytest.mark.parametrize("command", ["train", "render", "run"])
def test_cli_flags_default_as_the_step_does(command):
    parser = _subcommand(command)
    flags = {a.dest: a for a in parser._actions}
    for param in step_params.TRAIN_STEP_PARAMS:
        if command == "run" and param.name in ("run_id", "task_name"):
            assert param.name not in flags  # the pipeline passes KFP's own
            continue
        action = flags[param.name]
        assert param.cli_flag in action.option_strings
        expected = [] if isinstance(param.default, dict) else param.default
        # `kfdist run` leaves flags out that were not given: the pipeline's default applies.
        assert action.default == (argparse.SUPPRESS if command == "run" else expected), param.name


def test_kfdist_run_passes_unset_parameters_as_the_step_defaults():
    train = RunOptions(output_dir="x", training={"strategy": "mirrored"}).train
    assert train["workers"] == 1 and train["restart_policy"] == "ExitCode"
    assert train["epochs"] == step_params.PARAMS_BY_NAME["epochs"].default


def test_kfdist_run_takes_the_pipelines_own_defaults_unless_a_flag_is_given():
    args = cli.build_parser().parse_args(["run", "tabular", "--epochs", "3"])
    train = RunOptions(output_dir="x", pipeline="tabular", training=step_values(args)).train
    own = registry.get_definition("tabular").train_defaults
    assert train["epochs"] == 3
    assert train["batch_size_per_replica"] == own["batch_size_per_replica"] != \
        step_params.PARAMS_BY_NAME["batch_size_per_replica"].default


def test_unknown_parameters_are_named():
    with pytest.raises(Exception, match=r"unknown training settings \['gpus'\]"):
        step_params.complete({"gpus": 1})
