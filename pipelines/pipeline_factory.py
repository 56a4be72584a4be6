"""Every kfdist pipeline's KFP form: shard → distributed training → evaluate → export.

Each pipeline (`mnist`, `tabular`, `images`, `program`) is a `PipelineDefinition`
(`definition`, `shipped`): its source's parameters and the shard step's fixed
settings. The DAG, the training parameters (the training step's own,
`job.step_params`), the signature and the docstring are generated here, once
for all of them. The same compiled pipeline runs on a laptop through kfp.local
(`kfdist run`) and on a Kubeflow Pipelines cluster; only the training backend
differs.
"""

import dataclasses
import inspect
from collections import namedtuple
from typing import Any, Callable, Dict, NamedTuple, Tuple

from kfp import dsl

from kfdist.components.evaluate_model.component import evaluate_model
from kfdist.components.export_saved_model.component import export_saved_model
from kfdist.components.launch_program.component import train_program
from kfdist.components.shard_dataset.component import shard_dataset
from kfdist.components.train_distributed.component import train_distributed
from kfdist.pipelines import step_pods
from kfdist.pipelines.definition import (
    OBJECT_STORE_SECRET, PROGRAM, SET_BY_PIPELINE, TRAIN_PARAMS, PipelineDefinition)

_OUTPUTS = (("blessed", bool), ("evaluation_metrics", dsl.Metrics),
            ("training_metrics", dsl.Metrics))
_SHARD_PARAMS = frozenset(inspect.signature(shard_dataset.python_func).parameters)
_ARTIFACTS = ("dataset", "model", "metrics")


@dataclasses.dataclass(frozen=True)
class TrainParam:
    """A training parameter as the pipeline exposes it.

    Attributes:
      name: The step's parameter name.
      annotation: Its type.
      default: The pipeline's default.
      help: What it means (the pipeline's docstring).
    """

    name: str
    annotation: Any
    default: Any
    help: str


def train_default(definition: PipelineDefinition, param) -> Any:
    """The pipeline's default of a training parameter: its own, the step's pipeline
    default, or the step's default."""
    if param.name in definition.train_defaults:
        return definition.train_defaults[param.name]
    return param.default if param.pipeline_default is None else param.pipeline_default


def train_params(definition: PipelineDefinition) -> Tuple[TrainParam, ...]:
    """The training step's parameters the pipeline passes through, with its defaults.

    `train_distributed`'s come from `job.step_params`; `train_program`'s from
    the component itself (its signature and docstring), so each is defined once.
    """
    if definition.trainer == PROGRAM:
        signature = inspect.signature(train_program.python_func).parameters
        inputs = train_program.component_spec.inputs
        return tuple(TrainParam(name, p.annotation, definition.train_defaults.get(name, p.default),
                                " ".join(inputs[name].description.split()).rstrip("."))
                     for name, p in signature.items()
                     if name not in _ARTIFACTS
                     and name not in SET_BY_PIPELINE + (OBJECT_STORE_SECRET,))
    return tuple(TrainParam(p.name, Dict[str, str] if isinstance(p.default, dict) else type(p.default),
                            train_default(definition, p),
                            p.help + (" (cluster backends)" if p.cluster else ""))
                 for p in TRAIN_PARAMS)


def _signature(definition: PipelineDefinition) -> inspect.Signature:
    own = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind,
                             default=default) for name, kind, default, _ in definition.own_params]
    required = [p for p in train_params(definition) if p.default is inspect.Parameter.empty]
    optional = [p for p in train_params(definition) if p.default is not inspect.Parameter.empty]
    train = [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               annotation=p.annotation, default=p.default)
             for p in required + optional]
    own_required = [p for p in own if p.default is inspect.Parameter.empty]
    own_optional = [p for p in own if p.default is not inspect.Parameter.empty]
    return inspect.Signature(own_required + [p for p in train if p.default is inspect.Parameter.empty]
                             + own_optional + [p for p in train
                                               if p.default is not inspect.Parameter.empty],
                             return_annotation=NamedTuple("PipelineOutputs", list(_OUTPUTS)))


def _docstring(definition: PipelineDefinition) -> str:
    lines = [definition.summary, "",
             "The export task runs under `dsl.If(blessed)`: an unblessed model's run shows it",
             "skipped. Only the shard task is cached (keyed by its parameters and",
             "`source_version`); training, evaluation and export always run. Training",
             "parameters set to 0 or empty mean \"not set\" (the strategy's or the cluster's",
             "default): kfp's local runner cannot pass None.", "", "Args:"]
    lines += [f"    {name}: {meaning}" for name, _, _, meaning in definition.own_params]
    lines += [f"    {p.name}: {p.help}." for p in train_params(definition)]
    return "\n".join(lines)


def _dag(definition: PipelineDefinition, values: Dict[str, Any]):
    """The pipeline's DAG, given every parameter as a pipeline channel."""
    train_args = {p.name: values[p.name] for p in train_params(definition)}
    shard_args = {k: v for k, v in values.items() if k in _SHARD_PARAMS and k not in train_args}
    shard_args["runner"] = values["shard_runner"]
    named = dict(run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                 task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER)
    if definition.trainer == PROGRAM:
        shard = shard_dataset(**shard_args, **definition.shard_settings,
                              default_model_name=definition.default_model_name)
        train = train_program(dataset=shard.outputs["dataset"], **train_args, **named,
                              object_store_secret=values[OBJECT_STORE_SECRET])
    else:
        shard = shard_dataset(**shard_args, **definition.shard_settings, seed=train_args["seed"],
                              default_model_name=definition.default_model_name)
        train = train_distributed(dataset=shard.outputs["dataset"], **train_args, **named,
                                  object_store_secret=values[OBJECT_STORE_SECRET])
    evaluate = evaluate_model(model=train.outputs["model"], dataset=shard.outputs["dataset"],
                              accuracy_threshold=values["accuracy_threshold"],
                              slice_columns=values["slice_columns"],
                              export_base=values["export_base"],
                              serving_model_name=shard.outputs["serving_model_name"],
                              min_improvement=values["min_improvement"],
                              allow_class_change=values["allow_class_change"],
                              rmse_threshold=values["rmse_threshold"],
                              run_name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER)
    with dsl.If(evaluate.outputs["Output"] == True, name="blessed"):  # noqa: E712 (a DSL condition)
        export = export_saved_model(model=train.outputs["model"],
                                    blessing=evaluate.outputs["blessing"],
                                    export_base=values["export_base"],
                                    serving_model_name=shard.outputs["serving_model_name"])
    step_pods.configure(values[OBJECT_STORE_SECRET], shard=shard, train=train,
                        evaluate=evaluate, export=export)
    outputs = namedtuple("PipelineOutputs", [name for name, _ in _OUTPUTS])
    return outputs(evaluate.outputs["Output"], evaluate.outputs["metrics"], train.outputs["metrics"])


def build_pipeline(definition: PipelineDefinition) -> Callable:
    """The KFP pipeline of `definition`, named `kfdist-<name>`."""
    def pipeline(*args, **kwargs):
        return _dag(definition, pipeline.__signature__.bind(*args, **kwargs).arguments)

    pipeline.__signature__ = _signature(definition)
    pipeline.__doc__ = _docstring(definition)
    pipeline.__name__ = f"{definition.name}_pipeline"
    return dsl.pipeline(name=f"kfdist-{definition.name}",
                        description=definition.description)(pipeline)
