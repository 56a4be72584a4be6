"""The `mnist` pipeline: MNIST IDX files → shard → distributed training → evaluate → export.

Its definition is in `shipped`; its DAG, training parameters, signature and
docstring come from `pipeline_factory`, shared with the other pipelines.
"""

from kfdist.pipelines.pipeline_factory import build_pipeline
from kfdist.pipelines.shipped import MNIST as DEFINITION

mnist_pipeline = build_pipeline(DEFINITION)
