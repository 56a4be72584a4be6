"""The files a job's replicas write into its work_dir, which the step reads back."""

from __future__ import annotations

import os

# Files in a job's work_dir, shared by the replicas (writers) and the launcher (reader).
CHIEF_SUMMARY_FILE = "chief-summary.json"
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
