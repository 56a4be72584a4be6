"""The `mnist` pipeline: MNIST IDX files → shard → distributed training → evaluate → export.

Its DAG, training parameters, signature and docstring come from
`pipeline_factory`, shared with the other pipelines.
"""

import inspect

from kfdist.pipelines.pipeline_factory import PipelineDefinition, build_pipeline

PIPELINE_NAME = "mnist"
DEFINITION = PipelineDefinition(
    name=PIPELINE_NAME,
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
mnist_pipeline = build_pipeline(DEFINITION)
