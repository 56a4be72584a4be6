"""The `images` pipeline: TFRecord images → shard → distributed training → evaluate → export.

The examples are `tf.train.Example`s with an image (encoded PNG/JPEG, or raw
pixels with their shape) and an int64 label; the image size and channels
come from the data, and the exported model takes encoded images.
"""

import inspect

from kfdist.pipelines.pipeline_factory import PipelineDefinition, build_pipeline

PIPELINE_NAME = "images"
DEFINITION = PipelineDefinition(
    name=PIPELINE_NAME,
    summary="Shard, train, evaluate and, when the model is blessed, export an image classifier "
            "of TFRecord data.",
    description="Shards TFRecord files of tf.train.Example images (encoded PNG/JPEG or raw), "
                "trains a Keras classifier sized to the images with a distribution strategy, "
                "evaluates it on a held-out split and exports it for TF Serving, taking "
                "encoded images, when it reaches the accuracy threshold.",
    source_params=(
        ("source_uri", str, inspect.Parameter.empty,
         "TFRecord file or directory (local or gs://) of tf.train.Example records; files or "
         "folders named `train*` and `eval*`/`test*`/`valid*` stay the train and eval splits."),
        ("label_column", str, "label", "The int64 feature holding the class id."),
        ("image_feature", str, "",
         "The bytes feature holding the image; empty: the examples' only bytes feature."),
    ),
    shard_settings={"source_format": "tfrecord"},
    serving_model_name="images",
)
images_pipeline = build_pipeline(DEFINITION)
