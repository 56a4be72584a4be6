"""Launcher reaction: from a job's terminal condition to the step's return, watch against polling.

Runs against the tests' stateful API server (real HTTP, the real
`kubernetes` client) and its scripted operator:

* kfdist: `launcher.launch_and_wait` (create, watch, stream the chief's log);
  several jobs; reaction = return time - the moment the operator stored the
  terminal condition; API requests per job from the server's request log;
* polling every 15 s and 30 s (what kubeflow-training's client and the old
  KFP launcher did): a loop of GETs and sleeps on the same server, with the
  job ending at a random moment within a polling period. One job each
  (`--quick` skips them: their expected reaction is half the period).
"""

from __future__ import annotations

import os
from typing import Any, Dict

from benchmarks.common import REPO_ROOT, run_child

CHILD = """
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
from fakes.kube_server import FakeOperator, KubeServer, Scenario, sample_tfjob
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import launch_and_wait
jobs, periods = int(sys.argv[2]), [float(p) for p in sys.argv[3].split(",") if p]
server = KubeServer().start()
operator = FakeOperator(server.store)
api = KubeApi(server.api_client())
reactions, requests = [], []
for i in range(jobs):
    job = sample_tfjob(f"bench-{i}")
    operator.script(job.name, Scenario(pending_seconds=0.1, run_seconds=0.3))
    before = len(server.requests.all())
    launch_and_wait(job, api, timeout_seconds=60, log=lambda line: None, owner=None)
    reactions.append(time.monotonic() - operator.terminal_at[job.name])
    requests.append(len(server.requests.all()) - before)
polls = {}
rng = random.Random(0)
for period in periods:
    job = sample_tfjob(f"poll-{int(period)}")
    run = rng.uniform(0.5, period)  # the job ends somewhere inside a polling period
    operator.script(job.name, Scenario(pending_seconds=0.1, run_seconds=run))
    api.create_job(job.kind, job.namespace, job.body)
    gets = 0
    while True:
        gets += 1
        if job_status.terminal_condition(api.get_job(job.kind, job.namespace, job.name)):
            break
        time.sleep(period)
    polls[str(int(period))] = {"reaction_seconds": time.monotonic() - operator.terminal_at[job.name],
                               "gets": gets}
operator.stop(); server.stop()
_RESULT = {"reactions": reactions, "requests": requests, "polls": polls}
"""


def measure(jobs: int, poll_periods=(15.0, 30.0)) -> Dict[str, Any]:
    """Launches `jobs` jobs with kfdist's launcher and one per polling period with a poller."""
    r = run_child(CHILD, os.path.join(REPO_ROOT, "tests"), str(jobs),
                  ",".join(str(p) for p in poll_periods), timeout=600)
    reactions = sorted(r["reactions"])
    result = {"jobs": jobs,
              "kfdist": {"reaction_seconds_median": round(reactions[len(reactions) // 2], 4),
                         "reaction_seconds_max": round(reactions[-1], 4),
                         "api_requests_per_job": round(sum(r["requests"]) / jobs, 1)}}
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
