"""Launcher reaction: from a job's terminal condition to the step's return, watch against polling.

Runs against the real control plane by default: the project's test bed (`tests/cluster`: a
kube-apiserver, the Training Operator's own controller, and the genuine node, the kubelet on
containerd, running the pods of kfdist's runtime image), started here for the run (`up.sh DIR
--with-operators`); or any cluster a kubeconfig
names (`--kubeconfig`, with the Training Operator installed, the runtime image pullable, and
the namespace `default` free for the jobs). Each job is the TFJob the training step renders for
two MultiWorkerMirrored workers, its replicas printing one line and exiting, so the operator
itself writes every condition.

* kfdist: `launcher.launch_and_wait` (create, watch, follow the chief's log) on several jobs;
  reaction = the step's return - the moment a separate watch saw the Succeeded condition the
  operator wrote; API requests per job, counted by the client; start-up = from the call to the
  first replica pod seen Running (the operator's and the node's work included);
* polling every 15 s (what kubeflow-training's client and the old KFP launcher did): a loop of
  GETs and sleeps on the same server (`--quick` skips it: its expected reaction is half the
  period).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Dict, Iterator, Optional

import kubernetes

from benchmarks.common import started_bed
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.client.kube_errors import NotFoundError
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status
from kfdist.components.train_distributed.kubernetes.lifecycle.job_adoption import prepare_body
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import launch_and_wait

#: What each replica runs: one line, then success (the job's life is the operator's and node's).
REPLICA_COMMAND = ["python", "-c", "print('trained', flush=True)"]
JOB_TIMEOUT_S = 300


class CountingApiClient(kubernetes.client.ApiClient):
    """An `ApiClient` that counts the HTTP requests it sends (watches and log streams too)."""

    requests = 0

    def request(self, *args, **kwargs):  # the one method every API call goes through
        self.requests += 1
        return super().request(*args, **kwargs)


@contextlib.contextmanager
def api_server(kubeconfig: Optional[str]) -> Iterator[str]:
    """Yields the kubeconfig to use: `kubeconfig`, or that of a test bed started here (with
    kfdist's runtime image built for its pods)."""
    if kubeconfig:
        yield kubeconfig
        return
    with started_bed("--with-operators") as root:
        yield os.path.join(root, "kubeconfig")


def rendered_tfjob(run_id: str, namespace: str) -> RenderedJob:
    """The TFJob a training step renders for a two-worker MultiWorkerMirrored run."""
    from kfdist.components.train_distributed import runtime
    from kfdist.components.train_distributed.job import config
    from kfdist.components.train_distributed.kubernetes import backend

    step = runtime.build_job(backend="tfjob", strategy="multi_worker_mirrored", workers=2,
                             run_id=run_id, namespace=namespace, work_uri="gs://kfdist-bench/work")
    job = config.JobConfig(dataset_dir="dataset", model_dir="model", work_dir="reports",
                           training=step.training, job=step.spec)
    rendered = backend.render_step_job(job, step.cluster, None)[0]
    for replica in rendered.body["spec"]["tfReplicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            container["command"], container["args"] = REPLICA_COMMAND, []
    return rendered


class Observer:
    """Watches one job and its pods from the side: when the operator's terminal condition and
    the first Running replica were first seen (wall-clock seconds)."""

    def __init__(self, api_client: kubernetes.client.ApiClient, job: RenderedJob):
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.job = job
        self.terminal_at: Optional[float] = None
        self.first_running_at: Optional[float] = None
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._watch_job, daemon=True),
                         threading.Thread(target=self._watch_pods, daemon=True)]

    def start(self) -> "Observer":
        for thread in self._threads:
            thread.start()
        time.sleep(0.2)  # both watches open before the job exists
        return self

    def wait(self, seconds: float = 30.0) -> None:
        self._done.wait(seconds)

    def _watch_job(self) -> None:
        kind = self.job.kind
        for event in kubernetes.watch.Watch().stream(
                self.custom.list_namespaced_custom_object, kind.group, kind.version,
                self.job.namespace, kind.plural, timeout_seconds=JOB_TIMEOUT_S,
                field_selector=f"metadata.name={self.job.name}"):
            if job_status.terminal_condition(event["object"]):
                self.terminal_at = time.time()
                self._done.set()
                return

    def _watch_pods(self) -> None:
        for event in kubernetes.watch.Watch().stream(
                self.core.list_namespaced_pod, self.job.namespace, timeout_seconds=JOB_TIMEOUT_S,
                label_selector=f"training.kubeflow.org/job-name={self.job.name}"):
            if event["object"].status.phase == "Running":
                self.first_running_at = time.time()
                return


def _launch(api: KubeApi, client: CountingApiClient, job: RenderedJob,
            observer_client: kubernetes.client.ApiClient) -> Dict[str, float]:
    observer = Observer(observer_client, job).start()
    before, called = client.requests, time.time()
    launch_and_wait(job, api, timeout_seconds=JOB_TIMEOUT_S, log=lambda line: None, owner=None)
    returned = time.time()
    observer.wait()
    return {"reaction": returned - observer.terminal_at, "requests": client.requests - before,
            "startup": observer.first_running_at - called}


def _poll(api: KubeApi, job: RenderedJob, period: float,
          observer_client: kubernetes.client.ApiClient) -> Dict[str, float]:
    observer = Observer(observer_client, job).start()
    api.create_job(job.kind, job.namespace, prepare_body(job, owner=None))
    gets = 0
    while True:
        gets += 1
        if job_status.terminal_condition(api.get_job(job.kind, job.namespace, job.name)):
            break
        time.sleep(period)
    seen = time.time()
    observer.wait()
    return {"reaction_seconds": seen - observer.terminal_at, "gets": gets}


def _remove(api: KubeApi, job: RenderedJob) -> None:
    with contextlib.suppress(NotFoundError):
        api.delete_job(job.kind, job.namespace, job.name)


def _run(kubeconfig: str, jobs: int, poll_periods, namespace: str) -> Dict[str, Any]:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    client = CountingApiClient(configuration)
    api = KubeApi(client)
    observer_client = kubernetes.client.ApiClient(configuration)
    stamp = time.strftime("%H%M%S")
    launched = []
    for i in range(jobs):
        job = rendered_tfjob(f"bench-{stamp}-{i}", namespace)
        launched.append(_launch(api, client, job, observer_client))
        _remove(api, job)
    polls = {}
    for period in poll_periods:
        job = rendered_tfjob(f"poll-{stamp}-{int(period)}", namespace)
        polls[str(int(period))] = _poll(api, job, period, observer_client)
        _remove(api, job)
    return {"launched": launched, "polls": polls}


def measure(jobs: int, poll_periods=(15.0,), kubeconfig: Optional[str] = None,
            namespace: str = "default") -> Dict[str, Any]:
    """Launches `jobs` jobs with kfdist's launcher and one per polling period with a poller.

    Args:
      jobs: Jobs to launch with `launch_and_wait`.
      poll_periods: Polling periods (seconds) of the baseline, one job each.
      kubeconfig: The cluster to use; None: start the project's test bed.
      namespace: Where the jobs go.
    """
    with api_server(kubeconfig) as config_file:
        r = _run(config_file, jobs, poll_periods, namespace)
    reactions = sorted(j["reaction"] for j in r["launched"])
    startups = sorted(j["startup"] for j in r["launched"])
    result = {"jobs": jobs, "cluster": "given kubeconfig" if kubeconfig else "test bed",
              "kfdist": {"reaction_seconds_median": round(reactions[len(reactions) // 2], 4),
                         "reaction_seconds_max": round(reactions[-1], 4),
                         "reaction_seconds_min": round(reactions[0], 4),
                         "startup_seconds_median": round(startups[len(startups) // 2], 2),
                         "startup_seconds_min": round(startups[0], 2),
                         "startup_seconds_max": round(startups[-1], 2),
                         "api_requests_per_job": round(sum(j["requests"] for j in r["launched"])
                                                       / jobs, 1)}}
    for period in (15,):
        measured = r["polls"].get(str(period))
        result[f"poll_{period}s"] = {
            "reaction_seconds": None if measured is None else round(measured["reaction_seconds"], 2),
            "expected_reaction_seconds": period / 2,
            "gets": None if measured is None else measured["gets"]}
    base = result["poll_15s"]["reaction_seconds"] or result["poll_15s"]["expected_reaction_seconds"]
    result["poll_15s_over_kfdist"] = round(base / max(result["kfdist"]["reaction_seconds_median"],
                                                      1e-4))
    return result
