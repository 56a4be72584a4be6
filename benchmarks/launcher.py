"""Launcher reaction: from a job's terminal condition to the step's return, watch against polling.

Runs against any Kubernetes API server a kubeconfig names, with the real
`kubernetes` client; the benchmark plays the operator itself, writing each
job's conditions through the `status` subresource, so it knows to the
microsecond when a job ended. Without `--kubeconfig` it starts the project's
stateful test API server as a separate program (`python -m fakes.kube_server`,
run from `tests/`); on a real cluster, use a namespace no training operator
watches, with the TFJob CRD installed.

* kfdist: `launcher.launch_and_wait` (create, watch, follow the chief's log)
  on the TFJob the step renders; several jobs; reaction = return time - the
  moment the Succeeded condition was sent; API requests per job, counted by
  the client;
* polling every 15 s and 30 s (what kubeflow-training's client and the old
  KFP launcher did): a loop of GETs and sleeps on the same server, with the
  job ending at a random moment within a polling period. One job each
  (`--quick` skips them: their expected reaction is half the period).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, Iterator, Optional

import kubernetes

from benchmarks.common import REPO_ROOT
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.client.kube_errors import NotFoundError
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status
from kfdist.components.train_distributed.kubernetes.lifecycle.job_adoption import prepare_body
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import launch_and_wait

#: How long each job stays Created, then Running, before it succeeds (launcher runs).
CREATED_SECONDS, RUN_SECONDS = 0.1, 0.3


class CountingApiClient(kubernetes.client.ApiClient):
    """An `ApiClient` that counts the HTTP requests it sends (watches and log streams too)."""

    requests = 0

    def request(self, *args, **kwargs):  # the one method every API call goes through
        self.requests += 1
        return super().request(*args, **kwargs)


@contextlib.contextmanager
def api_server(kubeconfig: Optional[str]) -> Iterator[str]:
    """Yields the kubeconfig to use: `kubeconfig`, or that of a test API server started here."""
    if kubeconfig:
        yield kubeconfig
        return
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-kube-") as tmp:
        path = os.path.join(tmp, "kubeconfig")
        server = subprocess.Popen([sys.executable, "-m", "fakes.kube_server", "--kubeconfig-out", path],
                                  cwd=os.path.join(REPO_ROOT, "tests"), stdout=subprocess.PIPE, text=True)
        try:
            if not server.stdout.readline().startswith("http"):
                raise RuntimeError(f"the test API server did not start (exit {server.wait()})")
            yield path
        finally:
            server.terminate()
            server.wait(timeout=30)


def rendered_tfjob(run_id: str, namespace: str) -> RenderedJob:
    """The TFJob a training step renders for a two-worker MultiWorkerMirrored run."""
    from kfdist.components.train_distributed import runtime
    from kfdist.components.train_distributed.job import config
    from kfdist.components.train_distributed.kubernetes import backend

    step = runtime.build_job(backend="tfjob", strategy="multi_worker_mirrored", workers=2,
                             run_id=run_id, namespace=namespace, work_uri="gs://kfdist-bench/work")
    job = config.JobConfig(dataset_dir="dataset", model_dir="model", work_dir="reports",
                           training=step.training, job=step.spec)
    return backend.render_step_job(job, step.cluster, None)[0]


class Operator:
    """Writes one job's conditions as the training operator would, through `.../status`."""

    def __init__(self, api_client: kubernetes.client.ApiClient, job: RenderedJob):
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.job = job
        self.conditions: list = []
        self.terminal_at: Optional[float] = None

    def play(self, created_seconds: float, run_seconds: float) -> None:
        """Waits for the job, then Created, Running and, `run_seconds` later, Succeeded."""
        while not self._exists():
            time.sleep(0.005)
        self._add("Created", "TFJobCreated")
        time.sleep(created_seconds)
        self._add("Running", "TFJobRunning")
        time.sleep(run_seconds)
        self.conditions[-1]["status"] = "False"
        self.terminal_at = time.monotonic()
        self._add("Succeeded", "TFJobSucceeded")

    def start(self, created_seconds: float, run_seconds: float) -> threading.Thread:
        thread = threading.Thread(target=self.play, args=(created_seconds, run_seconds), daemon=True)
        thread.start()
        return thread

    def _exists(self) -> bool:
        try:
            self._call("get_namespaced_custom_object")
            return True
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
            return False

    def _add(self, ctype: str, reason: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.conditions.append({"type": ctype, "status": "True", "reason": reason,
                                "message": f"TFJob {self.job.name} is {ctype.lower()}.",
                                "lastUpdateTime": stamp, "lastTransitionTime": stamp})
        self._call("patch_namespaced_custom_object_status",
                   body={"status": {"conditions": self.conditions}})

    def _call(self, method: str, **kwargs) -> Any:
        kind = self.job.kind
        return getattr(self.custom, method)(kind.group, kind.version, self.job.namespace,
                                            kind.plural, self.job.name, **kwargs)


def _launch(api: KubeApi, client: CountingApiClient, job: RenderedJob,
            operator_client: kubernetes.client.ApiClient) -> Dict[str, float]:
    operator = Operator(operator_client, job)
    played = operator.start(CREATED_SECONDS, RUN_SECONDS)
    before = client.requests
    launch_and_wait(job, api, timeout_seconds=60, log=lambda line: None, owner=None)
    returned = time.monotonic()
    played.join()
    return {"reaction": returned - operator.terminal_at, "requests": client.requests - before}


def _poll(api: KubeApi, job: RenderedJob, period: float, run_seconds: float,
          operator_client: kubernetes.client.ApiClient) -> Dict[str, float]:
    operator = Operator(operator_client, job)
    played = operator.start(0.0, run_seconds)
    api.create_job(job.kind, job.namespace, prepare_body(job, owner=None))
    gets = 0
    while True:
        gets += 1
        if job_status.terminal_condition(api.get_job(job.kind, job.namespace, job.name)):
            break
        time.sleep(period)
    reaction = time.monotonic() - operator.terminal_at
    played.join()
    return {"reaction_seconds": reaction, "gets": gets}


def _remove(api: KubeApi, job: RenderedJob) -> None:
    with contextlib.suppress(NotFoundError):
        api.delete_job(job.kind, job.namespace, job.name)


def _run(kubeconfig: str, jobs: int, poll_periods, namespace: str) -> Dict[str, Any]:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    client = CountingApiClient(configuration)
    api = KubeApi(client)
    operator_client = kubernetes.client.ApiClient(configuration)
    stamp = time.strftime("%H%M%S")
    launched = []
    for i in range(jobs):
        job = rendered_tfjob(f"bench-{stamp}-{i}", namespace)
        launched.append(_launch(api, client, job, operator_client))
        _remove(api, job)
    rng = random.Random(0)
    polls = {}
    for period in poll_periods:
        job = rendered_tfjob(f"poll-{stamp}-{int(period)}", namespace)
        polls[str(int(period))] = _poll(api, job, period, rng.uniform(0.5, period), operator_client)
        _remove(api, job)
    return {"launched": launched, "polls": polls}


def measure(jobs: int, poll_periods=(15.0, 30.0), kubeconfig: Optional[str] = None,
            namespace: str = "default") -> Dict[str, Any]:
    """Launches `jobs` jobs with kfdist's launcher and one per polling period with a poller.

    Args:
      jobs: Jobs to launch with `launch_and_wait`.
      poll_periods: Polling periods (seconds) of the baseline, one job each.
      kubeconfig: The API server to use; None: start the test API server.
      namespace: Where the jobs go.
    """
    with api_server(kubeconfig) as config_file:
        r = _run(config_file, jobs, poll_periods, namespace)
    reactions = sorted(j["reaction"] for j in r["launched"])
    result = {"jobs": jobs,
              "kfdist": {"reaction_seconds_median": round(reactions[len(reactions) // 2], 4),
                         "reaction_seconds_max": round(reactions[-1], 4),
                         "api_requests_per_job": round(sum(j["requests"] for j in r["launched"])
                                                       / jobs, 1)}}
    for period in (15, 30):
        measured = r["polls"].get(str(period))
        result[f"poll_{period}s"] = {
            "reaction_seconds": None if measured is None else round(measured["reaction_seconds"], 2),
            "expected_reaction_seconds": period / 2,
            "gets": None if measured is None else measured["gets"]}
    base = result["poll_15s"]["reaction_seconds"] or result["poll_15s"]["expected_reaction_seconds"]
    result["poll_15s_over_kfdist"] = round(base / max(result["kfdist"]["reaction_seconds_median"],
                                                      1e-4))
    return result
