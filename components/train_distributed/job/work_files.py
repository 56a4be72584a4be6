"""The files a job's replicas write into its work_dir, which the step reads back."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Dict, List, Optional

# Files in a job's work_dir, shared by the replicas (writers) and the launcher (reader).
CHIEF_SUMMARY_FILE = "chief-summary.json"
#: The side-car evaluator's results, one per checkpoint evaluated.
EVALUATIONS_FILE = "evaluations.json"
#: The launcher's pid, in every replica's environment: a replica whose launcher is gone exits.
LAUNCHER_PID_ENV = "KFDIST_LAUNCHER_PID"


def replica_report_path(work_dir: str, task_label: str) -> str:
    """Where replica `task_label` (e.g. `worker-1`) writes its `ReplicaReport`."""
    return os.path.join(work_dir, f"replica-{task_label}.json")


def weights_dump_path(work_dir: str, task_label: str) -> str:
    """Where replica `task_label` dumps its final weights when `dump_weights` is set."""
    return os.path.join(work_dir, f"weights-{task_label}.npz")


def scratch_dir(work_dir: str, task_label: str) -> str:
    """A non-chief replica's scratch directory for saves that must not reach model_dir."""
    return os.path.join(work_dir, f"scratch-{task_label}")


def evaluations_uri(work_dir: str, state_uri: Optional[str]) -> str:
    """Where the evaluator publishes its results: a cluster job's shared state location, else
    the work_dir (shared by the local replicas)."""
    from kfdist.components.common import storage

    return (storage.join(state_uri, EVALUATIONS_FILE) if state_uri
            else os.path.join(work_dir, EVALUATIONS_FILE))


def read_evaluations(work_dir: str, state_uri: Optional[str] = None) -> List[Dict[str, float]]:
    """The evaluator's results as published so far (`[]` before the first, or without one)."""
    from kfdist.components.common import storage

    uri = evaluations_uri(work_dir, state_uri)
    with tempfile.TemporaryDirectory(prefix="kfdist-evaluations-") as scratch:
        try:
            local = (storage.download(uri, os.path.join(scratch, EVALUATIONS_FILE))
                     if storage.is_remote(uri) and storage.exists(uri) else uri)
            with open(local) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):  # not published yet, or being replaced
            return []
