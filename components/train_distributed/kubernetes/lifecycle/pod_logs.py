"""Streams the log of a job's chief (or MPI launcher) pod into the step's log.

A `PodLogFollower` runs on a daemon thread: it lists and then watches all the
pods of a job (one watch), reports any pod's trouble (Unschedulable,
ImagePullBackOff, OOMKilled, ...) as it happens, reports the phases of the log
pod (the chief, or the MPI launcher), and follows that pod's main container
log once it has started. Pods replaced by the operator (new uid) and restarted
containers are followed in turn.

Resuming without duplicates: lines emitted are counted per container run
(pod uid, restart count). When a stream drops, it is reopened from the start of
that container's log and the lines already emitted are skipped. This is exact
as long as the kubelet has not rotated the log file in between; the cost is
re-reading the log once per drop. A stream that ends while the pod still says
its container runs (the kubelet has not yet reported its exit, or a proxy cut
it) is reopened on the pod's next change, or after the policy's longest pause.

A per-replica value an error prints whole is folded into one line within each container run
(`value_folding`), as the local supervisor folds it within each process.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

from kfdist.components.common import value_folding
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status as js
from kfdist.components.train_distributed.kubernetes.client.api_retry import Backoff, RetryPolicy, call_with_retry
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    KubeApiError, NotFoundError, ResourceExpiredError, TransientApiError)

WATCH_SECONDS = 30
_RunKey = Tuple[str, int]  # (pod uid, container restart count)


class PodLogFollower:
    """Follows the logs of the pods matching a selector, on a daemon thread."""

    def __init__(self, api, namespace: str, job_pods_selector: str,
                 log_pod_labels: Mapping[str, str], log: Callable[[str], None],
                 retry: RetryPolicy):
        """Prepares a follower; `start` launches it.

        Args:
          api: A `KubeApi`.
          namespace: Namespace of the pods.
          job_pods_selector: `k=v,...` selecting all pods of the job (watched for trouble).
          log_pod_labels: Labels of the pod(s) among them whose log to stream.
          log: Receives each line, prefixed `[chief-0] ` and the like.
          retry: Retry policy for API failures.
        """
        self._api, self._namespace, self._selector = api, namespace, job_pods_selector
        self._log_pod_labels = dict(log_pod_labels)
        self._log, self._retry = log, retry
        self._stop = threading.Event()
        self._idle = threading.Event()  # set while nothing is being streamed
        self._lock = threading.Lock()
        self._closed = False
        self._pods: Dict[str, dict] = {}
        self._offsets: Dict[_RunKey, int] = {}
        self._finished: Set[_RunKey] = set()
        self._folder = value_folding.ValueFolder()  # per container run
        self._run_labels: Dict[_RunKey, str] = {}  # the replica of each run followed
        self._phases: Dict[str, str] = {}
        self._problems: List[str] = []
        #: Replica (`worker-1`) -> {pod uid: restartCount}: every pod that played it.
        self._incarnations: Dict[str, Dict[str, int]] = {}
        self._stream_backoff = Backoff(retry)  # log streams that drop or fail in a row
        #: Runs whose stream ended while they ran: (pod's resourceVersion then, reopen time).
        self._reopen: Dict[_RunKey, Tuple[str, float]] = {}
        self._thread = threading.Thread(target=self._run, name="kfdist-pod-logs", daemon=True)

    def start(self) -> None:
        """Starts following in the background."""
        self._thread.start()

    def problems(self) -> List[str]:
        """Every distinct trouble seen so far, as `chief-0: <reason>`."""
        with self._lock:
            return list(self._problems)

    def restarts(self) -> int:
        """Replica restarts seen: pods the operator re-created (new uid for the same
        replica: `ExitCode`, a launcher Job's next pod) plus in-place container restarts
        (`OnFailure`). Pods are watched between log streams and listed once at the end: a
        replica re-created twice while a stream held the follower counts once."""
        with self._lock:
            return sum(len(pods) - 1 + sum(pods.values()) for pods in self._incarnations.values())

    def finish(self, drain_seconds: float) -> None:
        """Stops following; lets a stream in progress drain for up to `drain_seconds`.

        When no container log has been read to its end yet (a short job whose
        pod went from Pending straight to done), reads what is there once.
        Nothing is passed to `log` after this returns.
        """
        self._stop.set()
        deadline = time.monotonic() + drain_seconds
        if self._thread.is_alive():
            self._idle.wait(drain_seconds)
        try:
            if not self._finished and self._idle.is_set() and time.monotonic() < deadline:
                self._read_remaining_logs()
        except KubeApiError as error:
            self._emit(f"[logs] could not read the remaining pod logs: {error}")
        finally:
            if self._idle.is_set():  # no stream feeds the folder any more
                for key, line in self._folder.flush_all():
                    self._emit(f"[{self._run_labels[key]}] {line}")
            with self._lock:
                self._closed = True

    # The follower thread -----------------------------------------------------

    def _run(self) -> None:
        try:
            self._follow()
        except Exception as error:  # logs are best effort: never fail the step for them
            self._emit(f"[logs] stopped following pod logs: {error}")
        finally:
            self._idle.set()

    def _follow(self) -> None:
        backoff = Backoff(self._retry)
        resource_version = self._relist()
        while not self._stop.is_set():
            pod = self._next_pod_to_stream()
            if pod is not None:
                self._stream(pod)
                continue
            self._idle.set()
            try:
                for event in self._api.watch_pods(self._namespace, self._selector,
                                                  resource_version, self._watch_seconds()):
                    resource_version = event.resource_version or resource_version
                    self._observe(event.type, event.object)
                    if self._stop.is_set() or self._next_pod_to_stream() is not None:
                        break
                backoff.reset()
            except ResourceExpiredError:
                resource_version = self._relist()
            except TransientApiError as error:
                backoff.pause_or_raise(error)
            finally:
                self._idle.clear()

    def _watch_seconds(self) -> int:
        """How long the next watch lasts: until the first reopen due (one past is stale)."""
        now = time.monotonic()
        self._reopen = {key: due for key, due in self._reopen.items() if due[1] > now}
        first = min((until for _, until in self._reopen.values()), default=now + WATCH_SECONDS)
        return max(1, min(WATCH_SECONDS, math.ceil(first - now)))

    def _relist(self) -> str:
        pods, resource_version = call_with_retry(self._retry, self._api.list_pods,
                                                  self._namespace, self._selector)
        self._pods.clear()
        for pod in pods:
            self._observe("ADDED", pod)
        return resource_version

    def _observe(self, event_type: str, pod: dict) -> None:
        name = pod["metadata"]["name"]
        if event_type == "DELETED":
            self._pods.pop(name, None)
            return
        if js.older_version(pod, self._pods.get(name)):
            return  # replayed by a watch resumed from before a fresh read
        self._pods[name] = pod
        who = js.pod_display_name(pod)
        self._count_incarnation(pod)
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if self._is_log_pod(pod) and self._phases.get(name) != phase:
            self._phases[name] = phase
            node = (pod.get("spec") or {}).get("nodeName")
            self._emit(f"[{who}] pod {name} is {phase}" + (f" on node {node}" if node else ""))
        for problem in js.pod_problems(pod):
            entry = f"{who}: {problem}"
            with self._lock:
                new = entry not in self._problems
                if new:
                    self._problems.append(entry)
            if new:
                self._emit(f"[{who}] {problem}")

    def _count_incarnation(self, pod: dict) -> None:
        """Records which pod (uid) plays the replica, and its container's restarts."""
        with self._lock:
            pods = self._incarnations.setdefault(js.pod_display_name(pod), {})
            uid = pod["metadata"].get("uid", pod["metadata"]["name"])
            pods[uid] = max(pods.get(uid, 0), js.restart_count(pod, js.main_container(pod)))

    def take_census(self) -> None:
        """One last look at the job's pods (after `finish`): a replica re-created while a log
        stream held the follower (it watches pods between streams) is counted by its new uid.

        Raises:
          KubeApiError: If the pods cannot be listed.
        """
        pods, _ = self._api.list_pods(self._namespace, self._selector)
        for pod in pods:
            self._count_incarnation(pod)

    def _is_log_pod(self, pod: dict) -> bool:
        labels = pod["metadata"].get("labels") or {}
        return all(labels.get(k) == v for k, v in self._log_pod_labels.items())

    def _next_pod_to_stream(self) -> Optional[dict]:
        for pod in sorted(filter(self._is_log_pod, self._pods.values()), key=js.creation_order):
            container = js.main_container(pod)
            key = js.container_run(pod, container)
            if (js.container_started(pod, container) and key not in self._finished
                    and not self._awaiting_change(pod, key)):
                return pod
        return None

    def _awaiting_change(self, pod: dict, key: _RunKey) -> bool:
        """Whether `key`'s stream ended while `pod`, unchanged since, said it ran (pause on)."""
        version, until = self._reopen.get(key, ("", 0.0))
        if version == pod["metadata"].get("resourceVersion") and time.monotonic() < until:
            return True
        self._reopen.pop(key, None)
        return False

    def _stream(self, pod: dict) -> None:
        name, container = pod["metadata"]["name"], js.main_container(pod)
        key = js.container_run(pod, container)
        try:
            if self._emit_new_lines(pod, key, self._api.stream_pod_log(
                    self._namespace, name, container)):
                self._stream_backoff.reset()
        except TransientApiError as error:
            self._stream_backoff.pause_or_raise(error)  # dropped: reopen and skip what was read
            return
        except NotFoundError:
            self._end_run(key)
            self._pods.pop(name, None)
            return
        except KubeApiError as error:
            if error.status != 400:  # e.g. RBAC: stop following, with the reason
                raise
            # 400: the container is not running after all ("waiting to start"); refresh below
        self._refresh_after_stream_end(name, container, key)

    def _refresh_after_stream_end(self, name: str, container: str, key: _RunKey) -> None:
        try:
            fresh = call_with_retry(self._retry, self._api.get_pod, self._namespace, name)
        except NotFoundError:
            self._end_run(key)
            self._pods.pop(name, None)
            return
        self._observe("MODIFIED", fresh)
        if js.container_run(fresh, container) != key or js.container_terminated(fresh, container):
            self._end_run(key)
        else:  # the kubelet has not yet reported the container's end, or a proxy cut the
            # stream: reopen once the pod changes (the watch says), else after the longest pause
            self._stream_backoff.next_pause(  # counts it; raises once the budget is spent
                TransientApiError(f"the log stream of pod {name} ended while it runs"))
            self._reopen[key] = (fresh["metadata"].get("resourceVersion", ""),
                                 time.monotonic() + self._retry.max_backoff_seconds)

    def _end_run(self, key: _RunKey) -> None:
        """Marks a container run as read to its end; a value it ended within is said."""
        self._finished.add(key)
        line = self._folder.flush(key)
        if line is not None:
            self._emit(f"[{self._run_labels[key]}] {line}")

    def _emit_new_lines(self, pod: dict, key: _RunKey, lines) -> bool:
        """Emits the lines past those already emitted for `key`, each run's per-replica values
        folded; True if there were any."""
        who = js.pod_display_name(pod)
        self._run_labels[key] = who
        skip, seen = self._offsets.get(key, 0), 0
        for line in lines:
            if self._closed:
                break  # finished: drop the stream
            seen += 1
            if seen > skip:
                self._offsets[key] = seen
                for out in self._folder.feed(line, key):
                    self._emit(f"[{who}] {out}")
        return seen > skip

    def _read_remaining_logs(self) -> None:
        pods, _ = self._api.list_pods(self._namespace, self._selector)
        for pod in sorted(filter(self._is_log_pod, pods), key=js.creation_order):
            container = js.main_container(pod)
            key = js.container_run(pod, container)
            if js.container_started(pod, container) and key not in self._finished:
                self._emit_new_lines(pod, key, self._api.stream_pod_log(
                    self._namespace, pod["metadata"]["name"], container, follow=False))

    def _emit(self, line: str) -> None:
        with self._lock:
            if not self._closed:
                self._log(line)
