"""The `images` pipeline: images → shard → distributed training → evaluate → export.

The source is TFRecord files of `tf.train.Example`s with an image (encoded
PNG/JPEG, or raw pixels with their shape) and an int64 label, or a folder of
PNG/JPEG files in one sub-folder per class (Keras's `image_dataset_from_directory`
layout; the folders' names become the class names). The image size and
channels come from the data, and the exported model takes encoded images.
"""

from kfdist.pipelines.pipeline_factory import build_pipeline
from kfdist.pipelines.shipped import IMAGES as DEFINITION

images_pipeline = build_pipeline(DEFINITION)
