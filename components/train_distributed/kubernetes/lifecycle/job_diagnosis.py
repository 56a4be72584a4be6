"""Why a job failed or hangs: the troubles of its pods, for the step's error message.

Reads every pod of the job (the operators label them with the job's name), the
Warning events of pods still Pending (FailedScheduling, FailedMount) and of the
job itself (e.g. the operator could not create pods). Best effort: an API
error here is logged, never raised, so the real failure is what the user sees.
"""

from __future__ import annotations

from typing import Callable, List, Sequence

from kfdist.components.train_distributed.kubernetes.lifecycle import job_status as js
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_errors import KubeApiError

#: At most this many Pending pods get their events read.
MAX_PENDING_PODS_TO_EXPLAIN = 4


def diagnose_pods(api, job: RenderedJob, already_seen: Sequence[str],
                  log: Callable[[str], None]) -> List[str]:
    """Lists the problems of the job's pods, logging the ones not seen before.

    Args:
      api: A `KubeApi`.
      job: The job.
      already_seen: Problems already reported (`chief-0: <reason>`), kept first.
      log: Receives each new problem as `[worker-0] <reason>`.

    Returns:
      All problems, `<replica>: <reason>`, without duplicates.
    """
    problems = list(already_seen)

    def add(who: str, problem: str) -> None:
        entry = f"{who}: {problem}"
        if entry not in problems:
            problems.append(entry)
            log(f"[{who}] {problem}")

    try:
        pods, _ = api.list_pods(job.namespace, job.pods_selector())
        unexplained_pending = []
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            found = js.pod_problems(pod)
            for problem in found:
                add(js.pod_display_name(pod), problem)
            if not found and (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                unexplained_pending.append(pod)
        for pod in unexplained_pending[:MAX_PENDING_PODS_TO_EXPLAIN]:
            events = api.list_events(job.namespace, "Pod", pod["metadata"]["name"])
            for line in js.warning_event_lines(events):
                add(js.pod_display_name(pod), line)
        for line in js.warning_event_lines(api.list_events(job.namespace, job.kind.kind, job.name)):
            add(job.kind.kind, line)
    except KubeApiError as error:
        log(f"Could not read the pods of {job.kind.kind} {job.namespace}/{job.name}: {error}")
    return problems
