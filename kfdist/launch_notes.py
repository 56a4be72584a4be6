"""The line `kfdist launch` adds when a job it ran succeeded but left its model directory empty.

(What a failed job's replicas lacked, such as kfdist in a user's `--image`, is said when they
fail: `program_failures`.)
"""

from __future__ import annotations

import os
from typing import Optional

from kfdist.components.common import storage
from kfdist.components.launch_program.program_job import PYTORCH

#: How a program of each framework saves its model, as the note suggests it.
SAVE_EXAMPLES = {PYTORCH: "torch.save(model.state_dict(), os.path.join(os.environ["
                          "'KFDIST_MODEL_DIR'], 'model.pt'))"}
#: The suggestion for any other framework (TensorFlow): kfdist's helper, under either Keras.
DEFAULT_SAVE_EXAMPLE = "kfdist.program.save_model(model)"


def empty_model_note(model_dir: str, framework: str) -> Optional[str]:
    """The line that says a succeeded job wrote no model, or None when it wrote one or the
    directory cannot be read from here (a PVC that is not mounted here).

    Args:
      model_dir: The job's `KFDIST_MODEL_DIR` (a local path or remote URI).
      framework: The job's framework (`tensorflow`, `pytorch`), for how to save a model.
    """
    if not (storage.is_remote(model_dir) or os.path.isdir(model_dir)):
        return None
    try:
        if storage.list_uris(model_dir.rstrip("/") + "/"):
            return None
    except Exception:  # noqa: BLE001  (a note after success: a bucket unread here says nothing)
        return None
    return (f"kfdist: the program wrote nothing into its model directory {model_dir} "
            "(KFDIST_MODEL_DIR): save the trained model there from the leader replica, e.g. "
            + SAVE_EXAMPLES.get(framework, DEFAULT_SAVE_EXAMPLE))
