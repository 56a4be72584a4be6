"""What a kfdist pipeline is, without Kubeflow Pipelines' SDK: `PipelineDefinition` and the
parameters every pipeline shares (their types, defaults and meanings, defined here once).

The KFP pipelines are built from these by `pipeline_factory`; `kfdist`'s flags read them here,
so parsing a command imports neither kfp nor TensorFlow.
"""

import dataclasses
import inspect
from typing import Any, Dict, List, Tuple

from kfdist.components.common.kfp_object_store import SECRET_KEYS
from kfdist.components.evaluate_model.verdict import (
    ALLOW_CLASS_CHANGE, MIN_IMPROVEMENT, RMSE_THRESHOLD)
from kfdist.components.shard_dataset.validation import (
    CATEGORICAL_DRIFT_THRESHOLD, NUMERIC_DRIFT_THRESHOLD)
from kfdist.components.train_distributed.job.step_params import PARAMS_BY_NAME, TRAIN_STEP_PARAMS
from kfdist.components.train_distributed.kubernetes.task_settings import TASK_CONFIG_PARAM

#: The pipeline parameter naming the Secret of the object store's keys: every step's, the
#: training replicas' too (the training step's parameter of that name).
OBJECT_STORE_SECRET = "object_store_secret"
#: Set by the pipeline itself (KFP placeholders), or by KFP (the task's `dsl.TaskConfig`), not
#: by whoever runs it.
SET_BY_PIPELINE = ("run_id", "task_name", TASK_CONFIG_PARAM)
#: The training step's parameters every pipeline passes through, in the step's order.
TRAIN_PARAMS = tuple(p for p in TRAIN_STEP_PARAMS
                     if p.name not in SET_BY_PIPELINE + (OBJECT_STORE_SECRET,))
#: A pipeline parameter: (name, type, default or `inspect.Parameter.empty`, meaning).
OwnParam = Tuple[str, type, Any, str]
#: The training steps a pipeline can have: kfdist's own models, or the user's program.
DISTRIBUTED = "train_distributed"
PROGRAM = "train_program"


#: The parameters every pipeline has after its source's own, before `serving_model_name`.
_SHARED_PARAMS: Tuple[OwnParam, ...] = (
    ("export_base", str, inspect.Parameter.empty,
     "Where to write the TF Serving layout `<export_base>/<serving_model_name>/<version>/`."),
    ("num_shards", int, 4, "Train shards written by the shard step."),
    ("split", str, "auto",
     "`auto`: keep the source's own split when its files or folders are named `train*` "
     "and `eval*`/`test*`/`valid*` (MNIST: `train-*`/`t10k-*`), else `hash`; "
     "`predefined` insists on it; `hash` holds out `eval_fraction` by a stable hash of "
     "each example (a table's row: its file and position, whichever columns are read)."),
    ("eval_fraction", float, 0.2, "Share of examples held out by the `hash` split."),
    ("shard_runner", str, "local",
     "Who shards: `local` (the shard step's process) or `beam` (an Apache Beam pipeline; "
     "the same dataset)."),
    ("beam_options", List[str], [],
     "With `shard_runner=beam`: Beam pipeline options, `KEY=VALUE` each (e.g. "
     "`runner=DataflowRunner`); empty: Beam's local runner, one worker per core."),
    ("reference_dataset", str, "",
     "Tables: a dataset directory a shard step wrote, to check the new data against; empty: "
     "the dataset the served model (the latest version under the export base and serving "
     "model name) was trained on, when there is one."),
    ("allow_anomalies", bool, False,
     "Train on a table that breaks its reference's schema (a column missing or new, a kind "
     "changed, a string value the reference never had, a jump in a column's missing cells, "
     "a label class gained or lost); by default the shard step fails on it, one line per "
     "anomaly."),
    ("categorical_drift_threshold", float, CATEGORICAL_DRIFT_THRESHOLD,
     "L-infinity distance between a string column's value distributions and the "
     "reference's (as TFDV measures it) above which the shard step warns of drift."),
    ("numeric_drift_threshold", float, NUMERIC_DRIFT_THRESHOLD,
     "Jensen-Shannon divergence (base 2, 0 to 1) between a numeric column's histogram and "
     "the reference's, at the reference's bins, above which the shard step warns of drift."),
    ("accuracy_threshold", float, 0.9, "Held-out accuracy needed to export the model."),
    ("rmse_threshold", float, RMSE_THRESHOLD,
     "A regression's (a table whose label is a number): the highest held-out RMSE, in the "
     "label's units, with which the model is exported; 0: the RMSE of predicting the train "
     "split's mean label for every example (the model must beat the mean). Against a "
     "served model, `min_improvement` is then the share by which the RMSE must fall below "
     "the served model's (0: not higher)."),
    ("min_improvement", float, MIN_IMPROVEMENT,
     "How much more held-out accuracy than the served model's (the latest version exported "
     "under the same export base and serving model name, scored on the same examples) the "
     "new model needs to be exported, in [-1, 1]: 0 not worse, 0.01 a point better, "
     "-0.01 up to a point worse, -1 the threshold alone. Without a served model the "
     "threshold alone decides."),
    ("allow_class_change", bool, ALLOW_CLASS_CHANGE,
     "Export a model that predicts other classes than the served one (a class gained, "
     "lost or spelled another way), on the threshold alone; by default such a model is not "
     "exported and the evaluation names both models' classes."),
    (OBJECT_STORE_SECRET, str, PARAMS_BY_NAME[OBJECT_STORE_SECRET].default,
     "Secret (in the run's namespace) whose keys "
     f"{' and '.join(f'`{k}`' for k in SECRET_KEYS.values())} every step gets as "
     f"{' and '.join(SECRET_KEYS)} (optional: a namespace without it still runs), and the "
     "training replicas too when they use `s3://` or `minio://`: the store of "
     "`s3://`/`minio://` URIs. The default is Kubeflow Pipelines' own store's. Kubeflow "
     "Pipelines (2.17) fails a step whose Secret name is empty: to give no keys (the steps "
     "then take them from elsewhere, e.g. a service account's role), name a Secret that does "
     "not exist."),
    ("slice_columns", List[str], [],
     "Table columns to slice the held-out split by: each value of a string column, or of "
     "a numeric one with few values (else quantile bins), gets its examples, accuracy and "
     "loss in the evaluation's report and metrics. Empty: no slices."),
)
#: The last of every pipeline's parameters.
_SOURCE_VERSION: OwnParam = (
    "source_version", str, "",
    "Identifies the content of `source_uri` (a dataset version or a hash); it only takes "
    "part in the shard task's cache key, so a cached dataset is reused only for the same "
    "data. `kfdist run` sets it from what identifies the files' content (local: size, "
    "mtime, ctime, inode; gs://: generation and checksums).")


def common_params(default_model_name: str) -> Tuple[OwnParam, ...]:
    """The parameters every pipeline has after its source's own (`default_model_name`: the
    model's name when neither `serving_model_name` nor the data gives one)."""
    serving_model_name = (
        "serving_model_name", str, "",
        "Model name in the serving layout: the served model the new one is compared with "
        "(and whose training data the table is checked against) and the name it is exported "
        "under. Empty: after the data, `source_uri`'s file or folder name in lower case, what "
        "a path cannot hold as `-` (`wine.csv` and `wine/train.csv`: `wine`), so two data "
        f"sets share an export base as two models; `{default_model_name}` when the data "
        "gives none. The shard step's log names it.")
    return (*_SHARED_PARAMS, serving_model_name, _SOURCE_VERSION)


@dataclasses.dataclass(frozen=True)
class PipelineDefinition:
    """One shipped pipeline.

    Attributes:
      name: Its short name (`kfdist run NAME`, `NAME.yaml`).
      summary: The docstring's first line.
      description: The description KFP shows.
      source_params: Its source's parameters (`source_uri` first).
      shard_settings: Fixed arguments of the shard step (e.g. the source format).
      default_model_name: The model's name in the serving layout when neither the
        `serving_model_name` parameter nor the data gives one (`serving_name`).
      train_defaults: The pipeline's own defaults of training parameters
        (e.g. a smaller batch for small tables); the others keep the step's.
      trainer: The training step: `train_distributed` (kfdist's models) or
        `train_program` (the user's program, given as the `command` parameter).
    """

    name: str
    summary: str
    description: str
    source_params: Tuple[OwnParam, ...]
    shard_settings: Dict[str, Any]
    default_model_name: str
    train_defaults: Dict[str, Any] = dataclasses.field(default_factory=dict)
    trainer: str = DISTRIBUTED

    @property
    def own_params(self) -> Tuple[OwnParam, ...]:
        """The pipeline's parameters before the training step's: required ones first."""
        params = self.source_params + common_params(self.default_model_name)
        return tuple(sorted(params, key=lambda p: p[2] is not inspect.Parameter.empty))
