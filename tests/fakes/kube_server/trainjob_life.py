"""A TrainJob's course under the test controllers: suspension, start, exits, the end (`trainer_rules`).

* Suspended (`spec.suspend`, e.g. set by Kueue's webhook): Jobs exist but no
  pods; condition `Suspended`/`Suspended`. Resumed: `Suspended` turns False
  (`Resumed`) and the deadline counts from then.
* A container exit: 0 marks its index succeeded (the Job completes when its
  success policy holds, ending its other pods); under `OnFailure` the
  container restarts in place, each restart counted against `backoffLimit`;
  under `Never` the pod failure policy decides: FailJob fails the Job,
  Ignore replaces the pod uncounted, Count replaces it up to `backoffLimit`.
* A failed Job fails the JobSet (`FailedJobs`), a set whose success policy
  holds completes (`AllJobsCompleted`); the TrainJob copies the condition.
  The finished set's active Jobs are deleted (and so their pods).
* `activeDeadlineSeconds` passed: `Failed`/`DeadlineExceeded`, JobSet deleted.
"""

from __future__ import annotations

import time

from fakes.kube_server import trainer_rules as rules
from fakes.kube_server.job_exits import restart_in_place
from fakes.kube_server.replica_process import Replica
from fakes.kube_server.store import NotFound


def hold_while_suspended(run) -> None:
    """Waits while the TrainJob is suspended, writing Suspended and then Resumed."""
    if not run.current()["spec"].get("suspend"):
        return
    run.set_condition("Suspended", "True", *rules.SUSPENDED)
    while run.current()["spec"].get("suspend"):
        run.wait(run.op.poll_seconds)
    run.trainjob = run.current()
    run.set_condition("Suspended", "False", *rules.RESUMED)


def supervise(run) -> None:
    """Starts the Jobs (dependents once their dependency is Ready) and follows them to the end."""
    while True:
        _start_ready_jobs(run)
        run.wait(run.op.poll_seconds)
        deadline = run.trainjob["spec"].get("activeDeadlineSeconds")
        if deadline is not None and time.monotonic() - run.started_at >= deadline:
            return _past_deadline(run)
        for job in run.jobs.values():
            for replica in [r for r in job.replicas if r.exited()]:
                if _on_exit(run, job, replica):
                    return


def _ready(run, job) -> bool:
    return job.started and all(job.sshd or r.running() or r.exit_code == 0 for r in job.replicas)


def _start_ready_jobs(run) -> None:
    waiting = [j for j in run.jobs.values() if not j.started and j.outcome is None]
    ready = [j for j in waiting if all(_ready(run, run.jobs[d]) for d in j.depends_on)]
    for job in ready:
        run.create_pods(job)
    if ready:
        run.wait(run.op.pending_seconds)
        for job in ready:
            for replica in job.replicas:
                run.start(replica)
        run.update_status()


def _on_exit(run, job, replica: Replica) -> bool:
    """Handles the end of a container's run; returns whether the TrainJob ended."""
    code = replica.collect_exit()
    limit = job.spec.get("backoffLimit", 6)
    if code == 0:
        run.pod_terminated(replica)
        job.succeeded.add(replica.index)
        if rules.success_policy_met(job.spec, job.succeeded):
            return _job_ended(run, job, "Complete")
        return False
    if replica.policy == "OnFailure":
        job.failures += 1
        if job.failures > limit:
            return _job_ended(run, job, "Failed", rules.JOB_BACKOFF_EXCEEDED)
        restart_in_place(run, replica, code)
        return False
    run.pod_terminated(replica)
    action = rules.pod_exit_action(job.spec, rules.NODE_CONTAINER, code)
    if action == rules.FAIL_JOB:
        pod = replica.pod_key
        return _job_ended(run, job, "Failed", rules.job_failed_by_rule(
            rules.NODE_CONTAINER, pod[3], pod[4], code, replica.index))
    if action == rules.COUNT:
        job.failures += 1
        if job.failures > limit:
            return _job_ended(run, job, "Failed", rules.JOB_BACKOFF_EXCEEDED)
    run.replace_pod(replica)
    run.wait(run.op.pending_seconds)
    run.start(replica)
    return False


def _job_ended(run, job, outcome: str, why=None) -> bool:
    """Job `job` completed or failed: its remaining pods end; the JobSet decides."""
    job.outcome = outcome
    still = [r for r in job.replicas if r.exit_code is None]
    run.kill_all(still)
    for replica in still:
        if outcome == "Failed":
            replica.collect_exit()
            run.pod_terminated(replica)
        else:  # the success policy holds: the Job controller deletes the lingering pods
            run.delete_pods([replica])
    _set_job_condition(run, job, outcome, why)
    if outcome == "Failed":
        return _finish(run, "Failed", *rules.jobset_failed(job.job_name))
    targets = (run.jobset["spec"].get("successPolicy") or {}).get("targetReplicatedJobs") or list(run.jobs)
    if all(run.jobs[name].outcome == "Complete" for name in targets):
        return _finish(run, "Complete", *rules.JOBSET_COMPLETED)
    run.update_status()
    return False


def _set_job_condition(run, job, outcome: str, why) -> None:
    reason, message = why or ("CompletionsReached", "Reached expected number of succeeded pods")
    try:
        run.store.update(job.key, lambda j: j.setdefault("status", {}).setdefault(
            "conditions", []).append({"type": outcome, "status": "True", "reason": reason,
                                      "message": message}))
    except NotFound:
        pass


def _finish(run, ctype: str, reason: str, message: str) -> bool:
    """The JobSet finished: its condition, the TrainJob's copy, and its active Jobs deleted."""
    jobset_type = "Completed" if ctype == "Complete" else "Failed"
    try:
        run.store.update(run.jobset_key(), lambda js: js.setdefault("status", {}).setdefault(
            "conditions", []).append({"type": jobset_type, "status": "True", "reason": reason,
                                      "message": message}))
    except NotFound:
        pass
    run.kill_all()
    for job in run.jobs.values():
        if job.outcome is None:
            try:
                run.store.delete(job.key)  # its pods go with it
            except NotFound:
                pass
    run.set_condition(ctype, "True", reason, message)
    return True


def _past_deadline(run) -> None:
    run.kill_all()
    try:
        run.store.delete(run.jobset_key())
    except NotFound:
        pass
    run.set_condition("Failed", "True", *rules.DEADLINE_EXCEEDED)

