"""The `tabular` pipeline: a CSV table → shard → distributed training → evaluate → export.

Numeric columns are standardised and string columns one-hot encoded over
their vocabularies, both learnt from the train split when sharding and
recorded with the dataset; the exported model takes the raw columns by name.
A string column that identifies rows (an id, a date) is left out unless kept.
"""

import inspect
from typing import List

from kfdist.components.shard_dataset.categorical import IDENTIFIER_MIN_ROWS, IDENTIFIER_SHARE
from kfdist.pipelines.pipeline_factory import PipelineDefinition, build_pipeline

PIPELINE_NAME = "tabular"
DEFINITION = PipelineDefinition(
    name=PIPELINE_NAME,
    summary="Shard, train, evaluate and, when the model is blessed, export a classifier of a "
            "CSV table.",
    description="Shards a CSV table (numeric and string columns, preprocessing recorded from "
                "the train split), trains a Keras classifier with a distribution strategy, "
                "evaluates it on a held-out split and exports it for TF Serving, taking the "
                "raw columns by name, when it reaches the accuracy threshold.",
    source_params=(
        ("source_uri", str, inspect.Parameter.empty,
         "CSV file, or directory of CSV files with one header (local or gs://); files or "
         "folders named `train*` and `eval*`/`test*`/`valid*` stay the train and eval splits."),
        ("label_column", str, "label",
         "The column holding the class: integer ids, or names (mapped to ids in sorted order)."),
        ("exclude_columns", List[str], [],
         "Columns to leave out of the dataset and the model (never read), e.g. `[\"id\"]`."),
        ("keep_columns", List[str], [],
         "String columns to keep although they identify rows: by default a string column with "
         f"a distinct value in at least {IDENTIFIER_SHARE:.0%} of the train rows (with "
         f"{IDENTIFIER_MIN_ROWS} rows or more: an id, a date, free text) is left out, and the "
         "shard step's log says so."),
    ),
    shard_settings={"source_format": "csv"},
    serving_model_name="tabular",
    # Tables are often small (the penguins sample has 344 rows): smaller batches, more epochs
    # and a livelier learning rate than for images; pass them to override.
    train_defaults={"epochs": 30, "batch_size_per_replica": 32, "learning_rate": 0.01},
)
tabular_pipeline = build_pipeline(DEFINITION)
