"""The `program` pipeline: any source → shard → your own training program → evaluate → export.

The training step is `train_program`: every replica runs the `command`
parameter unchanged, with the operator's environment and `KFDIST_DATA_DIR`,
`KFDIST_MODEL_DIR` and `KFDIST_CHECKPOINT_DIR` (see `kfdist.program`). The
Keras SavedModel the program's leader saves is evaluated and, when blessed,
exported exactly as kfdist's own models are.
"""

from kfdist.pipelines.pipeline_factory import build_pipeline
from kfdist.pipelines.shipped import PROGRAM as DEFINITION

program_pipeline = build_pipeline(DEFINITION)
