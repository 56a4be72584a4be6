"""The evaluator replica: evaluates every new checkpoint on the eval split, beside training.

The chief writes `checkpoints/ckpt` into the model directory after every
epoch. The evaluator (TF_CONFIG task type `evaluator`, outside the training
cluster) builds the same model without a strategy, and whenever the
checkpoint changes loads it and evaluates the whole eval split, logging one
line and appending the result to `evaluations.json` in the job's work
directory (and the job's shared state location on a cluster), with the epoch
the chief recorded beside the checkpoint. Like the operator's Evaluator
replica, it runs until the job ends it and never holds up training; only
once training is done does the chief wait, a bounded time, for the
evaluation of the last checkpoint (`wait_for_final_evaluation`), so that the
job does not end the evaluator before it.

A checkpoint caught mid-write (or mid-upload) fails to load or fetch for a
moment: such failures are retried. A failure that lasts `RETRY_SECONDS`
with nothing new published (a corrupt checkpoint, a missing bucket), or one
no retry cures (denied access), ends the evaluator with the error in its log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.train_distributed.job import config, work_files
from kfdist.components.train_distributed.replica import models, tensorboard_events
from kfdist.components.train_distributed.replica.eval_split import eval_dataset, eval_steps

POLL_SECONDS = 1.0
#: How long one checkpoint may keep failing to fetch or load before the evaluator gives up.
RETRY_SECONDS = 60.0
#: How long the chief waits, once training is done, for the evaluation of the last checkpoint.
FINAL_EVALUATION_SECONDS = 120.0
#: How long after loading a checkpoint the evaluator waits for the chief to record its epoch.
EPOCH_RECORD_SECONDS = 5.0


class EvaluatorFailedError(RuntimeError):
    """The evaluator cannot go on: the checkpoints cannot be fetched or loaded."""


def _never_cured(error: BaseException) -> bool:
    """Errors no retry cures: missing or refused credentials, denied access."""
    from google.api_core import exceptions as api_errors
    from google.auth import exceptions as auth_errors

    return isinstance(error, (api_errors.Unauthorized, api_errors.Forbidden,
                              auth_errors.DefaultCredentialsError, auth_errors.RefreshError,
                              tf.errors.PermissionDeniedError, tf.errors.UnauthenticatedError,
                              PermissionError))


class _Failures:
    """Times how long the current failure has lasted; raises once it is taken as permanent."""

    def __init__(self, retry_seconds: float, log: Callable[[str], None]):
        self.retry_seconds = retry_seconds
        self.log = log
        self.since: Optional[float] = None
        self.version: Optional[str] = None

    def clear(self) -> None:
        self.since = None

    def failed(self, what: str, error: BaseException, version: Optional[str] = None) -> None:
        """Logs a retry, or raises `EvaluatorFailedError` for a permanent failure.

        A failure on another checkpoint `version` than the last one starts a new count.
        """
        now = time.monotonic()
        if self.since is None or version != self.version:
            self.since, self.version = now, version
        lasted = now - self.since
        if _never_cured(error) or lasted >= self.retry_seconds:
            why = "cannot succeed" if _never_cured(error) else f"kept failing for {lasted:.0f}s"
            raise EvaluatorFailedError(
                f"evaluator: {what} {why}: {type(error).__name__}: {error}") from error
        self.log(f"evaluator: {what} failed ({type(error).__name__}); retrying")


def _checkpoint_version(prefix: str) -> Optional[str]:
    """A digest of the checkpoint's index (it holds every tensor's checksum): new weights, new digest."""
    try:
        with open(prefix + ".index", "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


def _await_epoch(prefix: str, version: str) -> Optional[int]:
    """The checkpoint's epoch, which the chief records just after saving it; None when it does
    not within `EPOCH_RECORD_SECONDS` (a checkpoint written by something else)."""
    deadline = time.monotonic() + EPOCH_RECORD_SECONDS
    while True:
        epoch = _checkpoint_epoch(prefix, version)
        if epoch is not None or time.monotonic() >= deadline:
            return epoch
        time.sleep(0.1)


def _checkpoint_epoch(prefix: str, version: str) -> Optional[int]:
    """The epoch the checkpoint with index digest `version` holds; None until the chief says."""
    path = os.path.join(os.path.dirname(prefix), model_artifact.CHECKPOINT_EPOCH_FILE)
    try:
        with open(path) as f:
            recorded = json.load(f)
    except (FileNotFoundError, ValueError):
        return None
    return int(recorded["epoch"]) if recorded.get("index_sha256") == version else None


def wait_for_final_evaluation(job: config.JobConfig, epoch: int, log: Callable[[str], None],
                              timeout: float = FINAL_EVALUATION_SECONDS) -> bool:
    """Waits (at most `timeout`) until the evaluator evaluated the checkpoint of `epoch`.

    The chief calls it once training is done: the job ends with the chief, as
    the operators decide, so without the wait the evaluator would be ended
    before it saw the last checkpoint.

    Returns:
      Whether the evaluation of `epoch` was published in time.
    """
    deadline = time.monotonic() + timeout
    log(f"waiting up to {timeout:.0f}s for the evaluator to evaluate epoch {epoch}'s checkpoint")
    while time.monotonic() < deadline:
        if any(e.get("epoch") == epoch
               for e in work_files.read_evaluations(job.work_dir, job.state_uri)):
            return True
        time.sleep(POLL_SECONDS)
    log(f"the evaluator did not evaluate epoch {epoch}'s checkpoint within {timeout:.0f}s; "
        "the report has the evaluations it published")
    return False


def _publish(job: config.JobConfig, results: List[Dict[str, float]]) -> None:
    from kfdist.components.common import storage

    local = os.path.join(job.work_dir, work_files.EVALUATIONS_FILE)
    with open(local + ".tmp", "w") as f:
        json.dump(results, f, indent=2)
    os.replace(local + ".tmp", local)
    if job.state_uri:
        storage.upload_file(local, work_files.evaluations_uri(job.work_dir, job.state_uri))


def _fetch_checkpoints(state_uri: str, local_dir: str) -> None:
    """Copies the published checkpoint here when it differs from the local one.

    Only its small index is read on every poll (it holds each tensor's
    checksum); the data files are copied when the index has changed.
    """
    from kfdist.components.common import storage

    remote = storage.join(state_uri, model_artifact.CHECKPOINTS_DIR)
    index_name = model_artifact.CHECKPOINT_PREFIX + ".index"
    remote_index = storage.join(remote, index_name)
    if not storage.list_uris(remote_index):
        return
    fetched = storage.download(remote_index, os.path.join(local_dir, index_name + ".remote"))
    local_index = os.path.join(local_dir, index_name)
    if os.path.isfile(local_index):
        with open(fetched, "rb") as new, open(local_index, "rb") as old:
            if new.read() == old.read():
                return
    storage.copy_dir_from(remote, local_dir)


def run(job: config.JobConfig, log: Callable[[str], None],
        should_stop: Callable[[], bool] = lambda: False,
        retry_seconds: float = RETRY_SECONDS) -> List[Dict[str, float]]:
    """Evaluates checkpoints as they appear until `should_stop()` (or the process is ended).

    Args:
      job: The job's configuration (model, dataset, where the checkpoints are).
      log: Where progress lines go.
      should_stop: Polled between checkpoints; True ends the loop.
      retry_seconds: How long a checkpoint may keep failing to fetch or load.

    Returns:
      The evaluations made, each `{"evaluation": n, "epoch": e, "loss": ..., "accuracy": ...}`.

    Raises:
      EvaluatorFailedError: When the checkpoints cannot be fetched or loaded
        (denied access, or a failure lasting `retry_seconds`).
    """
    meta = dataset_spec.load_metadata(job.dataset_dir)
    model = models.build_model(job.training.model_name, meta)
    models.compile_model(model, job.training.learning_rate, regression=meta.is_regression)
    data = eval_dataset(meta, job.dataset_dir)
    prefix = os.path.join(job.model_dir, model_artifact.CHECKPOINTS_DIR,
                          model_artifact.CHECKPOINT_PREFIX)
    log(f"evaluator pid={os.getpid()}: evaluating each new checkpoint {prefix} on the eval split")
    failures = _Failures(retry_seconds, log)
    seen = None
    results: List[Dict[str, float]] = []
    while not should_stop():
        if job.state_uri:  # a cluster job: the chief publishes its checkpoints there
            try:
                _fetch_checkpoints(job.state_uri, os.path.dirname(prefix))
            except Exception as e:  # noqa: BLE001 -- mid-upload or overwritten: retried a while
                failures.failed("fetching the checkpoint", e)
                time.sleep(POLL_SECONDS)
                continue
        pending = [p for p in _pending(os.path.dirname(prefix))
                   if p[0] not in {r.get("epoch") for r in results}]
        if pending:  # each epoch's checkpoint, kept for this evaluator: the oldest first
            epoch, pending_prefix = pending[0]
            try:
                model.load_weights(pending_prefix).expect_partial()
            except (tf.errors.OpError, ValueError, OSError) as e:  # still being fetched
                failures.failed("loading the checkpoint", e, pending_prefix)
                time.sleep(POLL_SECONDS)
                continue
            failures.clear()
            _record(model, data, meta, epoch, results, job, log)
            _drop_pending(job, pending_prefix)
            continue
        version = _checkpoint_version(prefix)
        if version is None or version == seen:
            if version is None:
                failures.clear()  # nothing published yet: nothing is failing
            time.sleep(POLL_SECONDS)
            continue
        try:
            model.load_weights(prefix).expect_partial()
        except (tf.errors.OpError, ValueError, OSError) as e:  # a checkpoint being (up)loaded
            failures.failed("loading the checkpoint", e, version)
            if job.state_uri:  # fetched mid-upload: fetch it whole again at the next poll
                with contextlib.suppress(FileNotFoundError):
                    os.remove(prefix + ".index")
            time.sleep(POLL_SECONDS)  # `seen` is left as it was: the same version is read again
            continue
        if _checkpoint_version(prefix) != version:  # replaced while it loaded: load the new one
            continue
        epoch = _await_epoch(prefix, version)
        seen = version
        failures.clear()
        if epoch is None or epoch not in {r.get("epoch") for r in results}:
            _record(model, data, meta, epoch, results, job, log)
    return results


def _record(model, data, meta, epoch: Optional[int], results: List[Dict[str, float]],
            job: config.JobConfig, log: Callable[[str], None]) -> None:
    """Evaluates the loaded weights on the eval split, logs and publishes the result."""
    metrics = model.evaluate(data, steps=eval_steps(meta), verbose=0, return_dict=True)
    results.append({"evaluation": len(results) + 1, "epoch": epoch,
                    **{k: float(v) for k, v in metrics.items()}})
    log(f"evaluator: evaluation {len(results)}: epoch {epoch or '?'} " +
        " ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())))
    _publish(job, results)
    tensorboard_events.write_evaluation(job.model_dir, job.state_uri, epoch or len(results),
                                        {k: float(v) for k, v in metrics.items()})


def _pending(checkpoints_dir: str) -> List[Tuple[int, str]]:
    """The kept checkpoints not evaluated yet, `(epoch, prefix)`, oldest first."""
    root = os.path.join(checkpoints_dir, model_artifact.PENDING_CHECKPOINTS_DIR)
    names = sorted(n for n in os.listdir(root) if n.startswith("epoch-")) if os.path.isdir(
        root) else []
    return [(int(n[len("epoch-"):]), os.path.join(root, n, model_artifact.CHECKPOINT_PREFIX))
            for n in names]


def _drop_pending(job: config.JobConfig, pending_prefix: str) -> None:
    """Removes an evaluated kept checkpoint, here and where the chief publishes it."""
    import shutil

    from kfdist.components.common import storage

    folder = os.path.dirname(pending_prefix)
    shutil.rmtree(folder, ignore_errors=True)
    if job.state_uri:
        storage.remove_tree(storage.join(job.state_uri, model_artifact.CHECKPOINTS_DIR,
                                         model_artifact.PENDING_CHECKPOINTS_DIR,
                                         os.path.basename(folder)))
