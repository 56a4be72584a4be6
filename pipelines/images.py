"""The `images` pipeline: images → shard → distributed training → evaluate → export.

The source is TFRecord files of `tf.train.Example`s with an image (encoded
PNG/JPEG, or raw pixels with their shape) and an int64 label, or a folder of
PNG/JPEG files in one sub-folder per class (Keras's `image_dataset_from_directory`
layout; the folders' names become the class names). The image size and
channels come from the data, and the exported model takes encoded images.
"""

import inspect

from kfdist.pipelines.pipeline_factory import PipelineDefinition, build_pipeline

PIPELINE_NAME = "images"
DEFINITION = PipelineDefinition(
    name=PIPELINE_NAME,
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
images_pipeline = build_pipeline(DEFINITION)
