"""The `program` pipeline: any source → shard → your own training program → evaluate → export.

The training step is `train_program`: every replica runs the `command`
parameter unchanged, with the operator's environment and `KFDIST_DATA_DIR`,
`KFDIST_MODEL_DIR` and `KFDIST_CHECKPOINT_DIR` (see `kfdist.program`). The
Keras SavedModel the program's leader saves is evaluated and, when blessed,
exported exactly as kfdist's own models are.
"""

import inspect

from kfdist.components.common.dataset_spec import CLASSIFICATION
from kfdist.pipelines.pipeline_factory import PROGRAM, PipelineDefinition, build_pipeline

PIPELINE_NAME = "program"
DEFINITION = PipelineDefinition(
    name=PIPELINE_NAME,
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
    trainer=PROGRAM,
)
program_pipeline = build_pipeline(DEFINITION)
