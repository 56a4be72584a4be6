"""The lines `kfdist launch` adds when a job it runs needs a word: the image a cluster job needs
for kfdist's entry, and the model directory a succeeded job left empty."""

from __future__ import annotations

import os
from typing import List, Optional

from kfdist import images
from kfdist.components.common import storage


def entry_users(program_dir: bool, stage: bool, trainjob_tensorflow: bool) -> List[str]:
    """What makes the replicas start the program through kfdist's entry (`pod_entry`)."""
    return ([name for name, used in (("--program-dir", program_dir), ("--stage", stage))
             if used] + (["a TensorFlow TrainJob (its TF_CONFIG)"] if trainjob_tensorflow else []))


def image_note(image: Optional[str], users: List[str]) -> Optional[str]:
    """The line that says a user's `--image` must hold kfdist, when the replicas start the
    program through kfdist's entry in it; None for kfdist's images, or without the entry.

    Args:
      image: `--image` (None: kfdist's runtime image, which holds kfdist).
      users: `entry_users`: what starts the program through the entry.
    """
    if image is None or not users or images.is_kfdist_image(image):
        return None
    return (f"kfdist: with {' and '.join(users)}, every replica starts your command through "
            f"kfdist's entry (python -m kfdist...) in --image {image}, so that image must "
            f"hold kfdist (build it "
            f"FROM {images.image('runtime')}), else every replica fails with \"No module "
            "named 'kfdist'\"; without --image, kfdist's runtime image runs it")


def empty_model_note(model_dir: str) -> Optional[str]:
    """The line that says a succeeded job wrote no model, or None when it wrote one or the
    directory cannot be read from here (a PVC that is not mounted here).

    Args:
      model_dir: The job's `KFDIST_MODEL_DIR` (a local path or `gs://`).
    """
    if not (storage.is_gcs(model_dir) or os.path.isdir(model_dir)):
        return None
    try:
        if storage.list_uris(model_dir.rstrip("/") + "/"):
            return None
    except Exception:  # noqa: BLE001  (a note after success: a bucket unread here says nothing)
        return None
    return (f"kfdist: the program wrote nothing into its model directory {model_dir} "
            "(KFDIST_MODEL_DIR): save the trained model there from the leader replica, e.g. "
            "kfdist.program.save_model(model)")
