"""What a replica writes: its log lines, its report, the leader's summary and the SavedModels."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from typing import List, Optional, Sequence

import numpy as np

from kfdist.components.common import dataset_spec, dataset_statistics, kept_epoch, model_artifact
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.job import work_files


def log(line: str) -> None:
    """Writes one line to stdout, which the launcher streams into the step's log."""
    print(line, flush=True)


def weights_sha256(weights: Sequence[np.ndarray]) -> str:
    """SHA-256 over the weights as float32 bytes, in model order."""
    digest = hashlib.sha256()
    for w in weights:
        digest.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return digest.hexdigest()


def write_json(path: str, value: dict) -> None:
    """Writes `value` to `path` atomically (a reader never sees half a file)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


@dataclasses.dataclass(frozen=True)
class ReplicaOutcome:
    """What a training replica did.

    Attributes:
      report: Its `ReplicaReport` (also written to the job's work_dir).
      leader: Whether it wrote the Model artifact (the chief, or Horovod rank 0).
    """

    report: model_artifact.ReplicaReport
    leader: bool


def save_model(model, job: config.JobConfig, role, meta: dataset_spec.DatasetMetadata) -> None:
    """Saves the SavedModels of a `strategies.Role`'s replica.

    The leader saves the Keras SavedModel into model_dir, then the serving
    SavedModel built from it (`serving_model`); under MultiWorkerMirrored every
    replica must call it (collectives), the others into a scratch directory
    deleted after.

    Raises:
      TrainingFailedError: If the leader's model does not take the dataset's examples
        (`signature_check`).
    """
    if role.leader:
        from kfdist.components.common import serving_model, signature_check
        from kfdist.components.common.errors import TrainingFailedError

        keras_dir = os.path.join(job.model_dir, model_artifact.SAVED_MODEL_DIR)
        # Horovod's optimizer holds Horovod ops, which a process without Horovod cannot load.
        model.save(keras_dir, save_format="tf", include_optimizer=role.hvd is None)
        unfit = signature_check.mismatch(keras_dir, meta)
        if unfit is not None:  # a `model_name` of `module:function` that ignored the input shape
            raise TrainingFailedError(f"the trained model ({keras_dir}) cannot be evaluated: "
                                      f"{unfit}")
        serving_model.save_serving_model(
            keras_dir, meta, os.path.join(job.model_dir, model_artifact.SERVING_MODEL_DIR))
        return
    if not role.all_save:
        return
    scratch = work_files.scratch_dir(job.work_dir, role.task.label)
    model.save(os.path.join(scratch, model_artifact.SAVED_MODEL_DIR), save_format="tf")
    shutil.rmtree(scratch, ignore_errors=True)


def write_chief_outputs(job: config.JobConfig, epochs: List[dict], examples_per_second: float,
                        wall_seconds: float, input_bound_fraction: Optional[float],
                        initial_epoch: int, best_epoch: Optional[int] = None) -> None:
    """The leader's outputs: dataset metadata (and a table's statistics) and history in
    model_dir, its summary in work_dir.

    The summary's final figures are the kept epoch's: `best_epoch`'s, whose weights the
    model holds (early stopping), else the last epoch's.
    """
    shutil.copyfile(os.path.join(job.dataset_dir, dataset_spec.METADATA_FILE),
                    os.path.join(job.model_dir, model_artifact.DATASET_METADATA_FILE))
    dataset_statistics.copy_statistics(
        job.dataset_dir, os.path.join(job.model_dir, model_artifact.DATASET_STATISTICS_FILE))
    write_json(os.path.join(job.model_dir, model_artifact.HISTORY_FILE), {"epochs": epochs})
    last = epochs[-1] if epochs else {}
    kept = next((e for e in epochs if e["epoch"] == best_epoch), last)
    write_json(os.path.join(job.work_dir, work_files.CHIEF_SUMMARY_FILE), {
        "epochs": len(epochs),
        "final_loss": float(kept.get("loss", float("nan"))),
        "final_accuracy": kept.get("accuracy"),  # None for a regression: its RMSE instead
        "final_rmse": kept.get("rmse"),
        "final_val_rmse": kept.get("val_rmse"),
        # The eval split's, when the leader validated after the kept epoch.
        "final_val_loss": kept.get("val_loss"),
        "final_val_accuracy": kept.get("val_accuracy"),
        "kept_epoch": kept.get("epoch"),
        "kept_validation_loss": kept.get(kept_epoch.SELECTION_LOSS),
        "examples_per_second": examples_per_second,
        "wall_seconds": wall_seconds,
        "input_bound_fraction": input_bound_fraction,
        "initial_epoch": initial_epoch,
    })
    if input_bound_fraction is not None:
        log(f"input-bound fraction: {input_bound_fraction:.1%} of step time waited for input")
