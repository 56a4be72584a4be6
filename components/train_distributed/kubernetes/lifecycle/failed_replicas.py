"""The last lines of a failed job's failed replicas, quoted in the step's error.

A failed job's pods are kept (cleanPodPolicy Running deletes only running ones), so the log of a
replica that failed, which the step did not stream unless it was the chief, can still be read.
Both cluster steps (`train_distributed`, `train_program`) and `kfdist launch` quote it.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from kfdist.components.common import value_folding
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_errors import KubeApiError
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status as js
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import JobTimeoutError

#: Lines of each failed replica's log quoted in the step's error (at most this many replicas).
FAILED_LOG_TAIL_LINES = 20
FAILED_LOG_MAX_REPLICAS = 3


@contextlib.contextmanager
def quoted(api, rendered: RenderedJob) -> Iterator[None]:
    """Adds the failed replicas' last lines to a `TrainingFailedError` raised inside (not to a
    timeout's: the job and its pods are deleted, no logs are left to quote)."""
    try:
        yield
    except JobTimeoutError:
        raise
    except TrainingFailedError as error:
        tails = last_lines(api, rendered)
        if not tails:
            raise
        raise TrainingFailedError(f"{error}\n{tails}") from error


def last_lines(api, rendered: RenderedJob, lines: int = FAILED_LOG_TAIL_LINES) -> str:
    """The last lines of the replicas whose container exited non-zero (best effort).

    A failed job's pods are kept (cleanPodPolicy Running deletes only running
    ones), so the log of the replica that failed, which the step did not stream
    unless it was the chief, can still be read.

    Returns:
      `Last lines of worker-1:` blocks, or "" when there is nothing to quote.
    """
    try:
        pods, _ = api.list_pods(rendered.namespace, rendered.pods_selector())
    except KubeApiError:
        return ""
    blocks = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        container = js.main_container(pod)
        state = js.container_status(pod, container).get("state") or {}
        if not state.get("terminated") or state["terminated"].get("exitCode", 0) == 0:
            continue
        try:
            tail = value_folding.folded_lines(api.stream_pod_log(
                rendered.namespace, pod["metadata"]["name"], container, follow=False))[-lines:]
        except KubeApiError:
            continue
        who = js.pod_display_name(pod)
        blocks.append(f"Last lines of {who}:\n" + ("\n".join(f"  {line}" for line in tail)
                                                   or "  (no output)"))
        if len(blocks) == FAILED_LOG_MAX_REPLICAS:
            break
    return "\n".join(blocks)
