"""The shipped pipelines' definitions: each one's source parameters, the shard step's fixed
settings, its model's default name and its own training defaults (`pipelines/<name>.py` builds
the KFP pipeline of each; `registry` finds them by name)."""

import inspect
from typing import List

from kfdist.components.common.dataset_spec import AUTO_TASK, CLASSIFICATION
from kfdist.components.shard_dataset.categorical import IDENTIFIER_MIN_ROWS, IDENTIFIER_SHARE
from kfdist.components.shard_dataset.label_values import MAX_NUMBER_CLASSES
from kfdist.pipelines import definition
from kfdist.pipelines.definition import PipelineDefinition

MNIST = PipelineDefinition(
    name="mnist",
    summary="Shard, train, evaluate and, when the model is blessed, export an MNIST classifier.",
    description="Shards MNIST-format data, trains a Keras model with a distribution "
                "strategy, evaluates it on a held-out split and exports it for TF Serving "
                "when it reaches the accuracy threshold.",
    source_params=(
        ("source_uri", str, inspect.Parameter.empty,
         "Directory (local, gs://, s3:// or minio://) of MNIST IDX files "
         "(`*-images-idx3-ubyte.gz` and `*-labels-idx1-ubyte.gz`); `train-*` and `t10k-*` stay "
         "the train and eval splits."),
    ),
    shard_settings={"source_format": "mnist_idx"},
    default_model_name="mnist",
)

TABULAR = PipelineDefinition(
    name="tabular",
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

IMAGES = PipelineDefinition(
    name="images",
    summary="Shard, train, evaluate and, when the model is blessed, export an image classifier "
            "of TFRecord data or a folder of images.",
    description="Shards TFRecord files of tf.train.Example images (encoded PNG/JPEG or raw) or "
                "a folder of PNG/JPEG files in one sub-folder per class, "
                "trains a Keras classifier sized to the images with a distribution strategy, "
                "evaluates it on a held-out split and exports it for TF Serving, taking "
                "encoded images, when it reaches the accuracy threshold.",
    source_params=(
        ("source_uri", str, inspect.Parameter.empty,
         "TFRecord file or directory (local, gs://, s3:// or minio://) of tf.train.Example "
         "records, or a folder of PNG/JPEG files in one sub-folder per class (the sub-folder's "
         "name is the class); files or folders named `train*` and `eval*`/`test*`/`valid*` stay "
         "the train and eval splits."),
        ("label_column", str, "label", "TFRecord: the int64 feature holding the class id."),
        ("image_feature", str, "",
         "TFRecord: the bytes feature holding the image; empty: the examples' only bytes "
         "feature."),
    ),
    shard_settings={"source_format": "images"},
    default_model_name="images",
)

PROGRAM = PipelineDefinition(
    name="program",
    summary="Shard, train with your own program, evaluate and, when the model is blessed, "
            "export it.",
    description="Shards a table, images or MNIST files, runs your own TensorFlow or PyTorch "
                "training program in every replica with the operator's environment, "
                "evaluates the Keras SavedModel it saves on a held-out split and exports it "
                "for TF Serving when it reaches the accuracy threshold.",
    source_params=(
        ("source_uri", str, inspect.Parameter.empty,
         "CSV, TFRecord or MNIST IDX files (a file or directory: local, gs://, s3:// or "
         "minio://); files or folders named `train*` and `eval*`/`test*`/`valid*` stay the "
         "train and eval splits."),
        ("source_format", str, "auto",
         "`csv`, `tfrecord`, `mnist_idx`, or `auto`: told by the files' names."),
        ("label_column", str, "label", "The column or feature holding the class."),
    ),
    # A program reads int64 class labels (`kfdist.program`): a quantity label is refused.
    shard_settings={"task": CLASSIFICATION},
    default_model_name="program",
    trainer=definition.PROGRAM,
)

#: Every shipped pipeline's definition by its name, in the order `kfdist` lists them.
DEFINITIONS = {d.name: d for d in (MNIST, TABULAR, IMAGES, PROGRAM)}
