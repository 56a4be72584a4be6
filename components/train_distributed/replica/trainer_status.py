"""Posts the leader's progress to Kubeflow Trainer's status API, where Trainer offers it.

Trainer (v2.2+, `TrainJobStatus` feature gate on) injects three variables into a TrainJob's
trainer pods: the URL of its status endpoint for this TrainJob, a projected ServiceAccount token
(audience: that endpoint) and the CA of the endpoint's certificate, both as file paths. The leader
posts, after every epoch, the share of epochs done, the estimated seconds left and the epoch's
metrics; Trainer writes them into `status.trainerStatus`. Without the variables nothing is posted;
a post that fails is logged once and never fails training.
"""

from __future__ import annotations

import datetime
import json
import os
import ssl
import time
import urllib.error
import urllib.request
from typing import Mapping, Optional

import tensorflow as tf

from kfdist.components.train_distributed.replica.outputs import log

#: What Trainer v2.3 injects (its `TrainJobStatus` plugin's names: `SERVER`, not `STATUS`).
STATUS_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
STATUS_TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
STATUS_CA_CERT_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
#: Seconds one post may take (the epoch waits for it).
POST_TIMEOUT_S = 5.0
#: Consecutive failed posts after which the leader stops posting.
MAX_FAILURES = 3
#: Trainer accepts at most this many metrics per update.
MAX_METRICS = 256


def status_update(epochs_done: int, epochs: int, seconds_per_epoch: float,
                  metrics: Mapping[str, float], now: datetime.datetime) -> dict:
    """The body of one status post (Trainer's `UpdateTrainJobStatusRequest`).

    Args:
      epochs_done: Epochs finished, counting those of an earlier attempt resumed from a backup.
      epochs: Epochs in all.
      seconds_per_epoch: Mean wall seconds of this attempt's epochs (validation included).
      metrics: The latest epoch's metrics by name.
      now: When the status was observed (UTC).
    """
    remaining = max(epochs - epochs_done, 0)
    status = {
        "progressPercentage": min(100, int(100 * epochs_done / max(epochs, 1))),
        "estimatedRemainingSeconds": int(round(remaining * max(seconds_per_epoch, 0.0))),
        "metrics": [{"name": name[:64], "value": f"{float(value):.6g}"}
                    for name, value in sorted(metrics.items())][:MAX_METRICS],
        "lastUpdatedTime": now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"trainerStatus": status}


class StatusEndpoint:
    """Trainer's status endpoint for this TrainJob, as the pod's environment describes it."""

    def __init__(self, url: str, token_file: str, ca_file: str):
        self.url, self._token_file = url, token_file
        self._context = ssl.create_default_context(cafile=ca_file)
        self._failures = 0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Optional["StatusEndpoint"]:
        """The endpoint, or None where Trainer offers none (no TrainJob, or its gate is off)."""
        names = (STATUS_URL_ENV, STATUS_TOKEN_ENV, STATUS_CA_CERT_ENV)
        if not all(environ.get(name) for name in names):
            return None
        return cls(*(environ[name] for name in names))

    @property
    def given_up(self) -> bool:
        return self._failures >= MAX_FAILURES

    def post(self, body: dict) -> bool:
        """Posts one update; True when Trainer took it. Logs the first failure of a series."""
        try:
            with open(self._token_file, encoding="utf-8") as f:  # rotated by the kubelet
                token = f.read().strip()
            request = urllib.request.Request(
                self.url, data=json.dumps(body).encode(), method="POST",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S, context=self._context):
                pass
        except (OSError, urllib.error.URLError, ssl.SSLError) as error:
            self._failures += 1
            if self._failures == 1 or self.given_up:
                detail = error.read().decode(errors="replace")[:200] if isinstance(
                    error, urllib.error.HTTPError) else error
                log(f"training progress not posted to Kubeflow Trainer ({self.url}): {detail}"
                    + ("; no more posts" if self.given_up else ""))
            return False
        self._failures = 0
        return True


class TrainerStatusReporter(tf.keras.callbacks.Callback):
    """Posts the leader's progress after every epoch (the last one: 100%, no time left).

    Its metrics are the epoch's logs (loss, accuracy and, on the leader, the validation's) and
    `examples_per_second`, over the epoch's training steps as the epoch line reports it.
    """

    def __init__(self, endpoint: StatusEndpoint, epochs: int, examples_per_epoch: int,
                 history=None):
        super().__init__()
        self._endpoint = endpoint
        self._epochs = epochs
        self._examples_per_epoch = examples_per_epoch
        self._history = history
        self._started = 0.0
        self._epoch_started = 0.0
        self._epochs_here = 0

    def on_train_begin(self, logs=None):
        self._started = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if self._endpoint.given_up:
            return
        now = time.perf_counter()
        self._epochs_here += 1
        steps_seconds = (self._history.steps_seconds if self._history is not None
                         else now - self._epoch_started)
        metrics = {k: float(v) for k, v in (logs or {}).items() if _is_number(v)}
        metrics["examples_per_second"] = self._examples_per_epoch / max(steps_seconds, 1e-9)
        self._endpoint.post(status_update(
            epoch + 1, self._epochs, (now - self._started) / self._epochs_here, metrics,
            datetime.datetime.now(datetime.timezone.utc)))


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def reporter(leader: bool, epochs: int, examples_per_epoch: int,
             history=None) -> Optional[TrainerStatusReporter]:
    """The leader's reporter where Trainer offers a status endpoint, else None."""
    endpoint = StatusEndpoint.from_environment() if leader else None
    return TrainerStatusReporter(endpoint, epochs, examples_per_epoch, history) if endpoint else None
