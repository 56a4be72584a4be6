"""The `tabular` pipeline: a CSV table → shard → distributed training → evaluate → export.

Numeric columns are standardised and string columns one-hot encoded over
their vocabularies, both learnt from the train split when sharding and
recorded with the dataset; the exported model takes the raw columns by name.
A string column that identifies rows (an id, a date) is left out unless kept.
"""

from kfdist.pipelines.pipeline_factory import build_pipeline
from kfdist.pipelines.shipped import TABULAR as DEFINITION

tabular_pipeline = build_pipeline(DEFINITION)
