"""The `tabular` pipeline: a CSV table → shard → distributed training → evaluate → export.

Numeric columns are standardised and string columns one-hot encoded over
their vocabularies, both learnt from the train split when sharding and
recorded with the dataset; the exported model takes the raw columns by name.
A string column that identifies rows (an id, a date) is left out unless kept.
"""

import inspect
from typing import List

from kfdist.components.common.dataset_spec import AUTO_TASK
from kfdist.components.shard_dataset.categorical import IDENTIFIER_MIN_ROWS, IDENTIFIER_SHARE
from kfdist.components.shard_dataset.label_values import MAX_NUMBER_CLASSES
from kfdist.pipelines.pipeline_factory import PipelineDefinition, build_pipeline

PIPELINE_NAME = "tabular"
DEFINITION = PipelineDefinition(
    name=PIPELINE_NAME,
    summary="Shard, train, evaluate and, when the model is blessed, export a classifier (or a "
            "regressor) of a CSV table.",
    description="Shards a CSV table (numeric and string columns, preprocessing recorded from "
                "the train split), trains a Keras classifier, or a regressor when the label is "
                "a number, with a distribution strategy, evaluates it on a held-out split and "
                "exports it for TF Serving, taking the raw columns by name, when it reaches the "
                "accuracy (or RMSE) threshold.",
    source_params=(
        ("source_uri", str, inspect.Parameter.empty,
         "CSV file, or directory of CSV files with one header (local, gs://, s3:// or "
         "minio://); files or folders named `train*` and `eval*`/`test*`/`valid*` stay the "
         "train and eval splits."),
        ("label_column", str, "label",
         "The column holding the class (integer ids, or names mapped to ids in sorted order) "
         "or, for a regression, the number to predict (see `task`)."),
        ("task", str, AUTO_TASK,
         "What the label is: `auto`: a number to predict (regression) when it holds more than "
         f"{MAX_NUMBER_CLASSES} distinct numbers, else classes (classification; a few numbers "
         "that are not whole are refused); `classification`: classes (a quantity is refused); "
         "`regression`: a number (a text label is refused). A regression trains one linear "
         "output on the mean squared error and is judged by its RMSE (`rmse_threshold`)."),
        ("exclude_columns", List[str], [],
         "Columns to leave out of the dataset and the model (never read), e.g. `[\"id\"]`."),
        ("keep_columns", List[str], [],
         "String columns to keep although they identify rows: by default a string column with "
         f"a distinct value in at least {IDENTIFIER_SHARE:.0%} of the train rows (with "
         f"{IDENTIFIER_MIN_ROWS} rows or more: an id, a date, free text) is left out, and the "
         "shard step's log says so."),
    ),
    shard_settings={"source_format": "csv"},
    default_model_name="tabular",
    # Tables are often small (the penguins sample has 344 rows): smaller batches, more epochs
    # and a livelier learning rate than for images; pass them to override.
    train_defaults={"epochs": 30, "batch_size_per_replica": 32, "learning_rate": 0.01},
)
tabular_pipeline = build_pipeline(DEFINITION)
