"""The `mnist` pipeline: shard → distributed training → evaluate → export.

The same compiled pipeline runs on a laptop through kfp.local (`kfdist run
mnist`) and on a Kubeflow Pipelines cluster; only the training backend differs.

Its training parameters are the training step's (`job.step_params`): the
pipeline's signature and docstring are generated from that one definition.
"""

import inspect
from typing import Dict, NamedTuple

from kfp import dsl

from kfdist.pipelines import step_pods

from kfdist.components.evaluate_model.component import evaluate_model
from kfdist.components.export_saved_model.component import export_saved_model
from kfdist.components.shard_dataset.component import shard_dataset
from kfdist.components.train_distributed.component import train_distributed
from kfdist.components.train_distributed.job.step_params import TRAIN_STEP_PARAMS

PIPELINE_NAME = "mnist"
#: Set by the pipeline itself (KFP placeholders), not by whoever runs it.
_SET_BY_PIPELINE = ("run_id", "task_name")
#: The pipeline's own parameters: (name, type, default or `inspect.Parameter.empty`, meaning).
_OWN_PARAMS = (
    ("source_uri", str, inspect.Parameter.empty,
     "Directory (local or gs://) of MNIST IDX files (`*-images-idx3-ubyte.gz` and "
     "`*-labels-idx1-ubyte.gz`)."),
    ("export_base", str, inspect.Parameter.empty,
     "Where to write the TF Serving layout `<export_base>/<serving_model_name>/<version>/`."),
    ("num_shards", int, 4, "Train shards written by the shard step."),
    ("eval_fraction", float, 0.2, "Share of examples held out for evaluation."),
    ("accuracy_threshold", float, 0.9, "Held-out accuracy needed to export the model."),
    ("serving_model_name", str, "mnist", "Model name in the serving layout."),
    ("source_version", str, "",
     "Identifies the content of `source_uri` (a dataset version or a hash); it only takes "
     "part in the shard task's cache key, so a cached dataset is reused only for the same "
     "data. `kfdist run` sets it from the files' names, sizes and times."),
)
#: The training step's parameters the pipeline passes through, in the step's order.
TRAIN_PARAMS = tuple(p for p in TRAIN_STEP_PARAMS if p.name not in _SET_BY_PIPELINE)


def _signature() -> inspect.Signature:
    own = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind,
                             default=default) for name, kind, default, _ in _OWN_PARAMS]
    train = [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               annotation=Dict[str, str] if isinstance(p.default, dict)
                               else type(p.default),
                               default=p.default if p.pipeline_default is None else p.pipeline_default)
             for p in TRAIN_PARAMS]
    outputs = NamedTuple("MnistOutputs", [("blessed", bool), ("evaluation_metrics", dsl.Metrics),
                                          ("training_metrics", dsl.Metrics)])
    return inspect.Signature(own + train, return_annotation=outputs)


def _docstring() -> str:
    lines = ["Shard, train, evaluate and, when the model is blessed, export an MNIST classifier.",
             "",
             "The export task runs under `dsl.If(blessed)`: an unblessed model's run shows it",
             "skipped. Only the shard task is cached (keyed by its parameters and",
             "`source_version`); training, evaluation and export always run. Training",
             "parameters set to 0 or empty mean \"not set\" (the strategy's or the cluster's",
             "default): kfp's local runner cannot pass None.", "", "Args:"]
    lines += [f"    {name}: {meaning}" for name, _, _, meaning in _OWN_PARAMS]
    lines += [f"    {p.name}: {p.help}" + (" (cluster backends)." if p.cluster else ".")
              for p in TRAIN_PARAMS]
    return "\n".join(lines)


def _mnist(*args, **kwargs):
    return _mnist_dag(**_mnist.__signature__.bind(*args, **kwargs).arguments)


def _mnist_dag(source_uri, export_base, num_shards, eval_fraction, accuracy_threshold,
               serving_model_name, source_version, **train_params):
    """The pipeline's DAG, given every parameter as a pipeline channel."""
    from collections import namedtuple

    shard = shard_dataset(source_uri=source_uri, source_format="mnist_idx",
                          num_shards=num_shards, eval_fraction=eval_fraction,
                          seed=train_params["seed"], source_version=source_version)
    train = train_distributed(dataset=shard.outputs["dataset"], **train_params,
                              run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                              task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER)
    evaluate = evaluate_model(model=train.outputs["model"], dataset=shard.outputs["dataset"],
                              accuracy_threshold=accuracy_threshold)
    with dsl.If(evaluate.outputs["Output"] == True, name="blessed"):  # noqa: E712 (a DSL condition)
        export = export_saved_model(model=train.outputs["model"],
                                    blessing=evaluate.outputs["blessing"],
                                    export_base=export_base, serving_model_name=serving_model_name)
    step_pods.configure(shard=shard, train=train, evaluate=evaluate, export=export)
    outputs = namedtuple("MnistOutputs", ["blessed", "evaluation_metrics", "training_metrics"])
    return outputs(evaluate.outputs["Output"], evaluate.outputs["metrics"], train.outputs["metrics"])


_mnist.__signature__ = _signature()
_mnist.__doc__ = _docstring()
_mnist.__name__ = "mnist_pipeline"
mnist_pipeline = dsl.pipeline(
    name="kfdist-mnist",
    description="Shards MNIST-format data, trains a Keras model with a distribution "
                "strategy, evaluates it on a held-out split and exports it for TF Serving "
                "when it reaches the accuracy threshold.",
)(_mnist)
