"""What the operators do when a replica's container exits, by job kind and restart policy."""

from __future__ import annotations

from fakes.kube_server import operator_rules as rules
from fakes.kube_server import pods as pod_objects
from fakes.kube_server.replica_process import Replica

#: The kubelet's restart back-off, shortened for tests.
RESTART_DELAY_SECONDS = 0.2


def handle_exit(run, replica: Replica) -> bool:
    """Handles the end of `replica`'s current run in job `run`; returns whether the job ended."""
    code = replica.collect_exit()
    if code == 0:
        run.pod_terminated(replica)
        return False
    if run.mpi:
        return _launcher_failed(run, replica, code) if replica.rtype == "Launcher" else False
    return _tf_replica_failed(run, replica, code)


def _tf_replica_failed(run, replica: Replica, code: int) -> bool:
    action = rules.tf_on_container_exit(replica.policy, code)
    if action == rules.RESTART_IN_PLACE:
        # The kubelet restarts the container; the operator sees the new restartCount and,
        # past the limit, fails the job before the new run gets anywhere.
        counted = [r.restart_count + (r is replica) for r in run.replicas
                   if r.policy in ("OnFailure", "Always", "ExitCode")]
        if rules.tf_past_backoff_limit(run.run_policy.get("backoffLimit"), counted):
            run.finish("Failed", *rules.tf_failed_backoff(run.kind, run.name), delete_all=True)
            return True
        restart_in_place(run, replica, code)
        return False
    run.pod_terminated(replica)
    if action == rules.RESTART:
        active = sum(1 for r in run.replicas if r.running())
        if rules.tf_new_failure_exceeds_zero_limit(run.run_policy.get("backoffLimit"), active,
                                                   len(run.replicas)):
            run.finish("Failed", *rules.tf_failed_backoff(run.kind, run.name), delete_all=True)
            return True
        failed = sum(1 for r in run.replicas if r.rtype == replica.rtype and r.exit_code not in (None, 0))
        run.condition("Restarting", *(
            rules.pytorch_restarting(run.name, failed, replica.rtype) if run.pytorch
            else rules.tf_restarting(run.kind, run.name, replica.rtype)))
        run.replace_pod(replica)
        run.wait(run.op.pending_seconds)
        run.start(replica)
        run.condition("Running", *run.running_condition())
        return False
    if replica.policy == "ExitCode":
        run.finish("Failed", *rules.tf_failed_permanent_exit_code(run.kind, run.name, replica.rtype))
        return True
    failed = sum(1 for r in run.replicas if r.rtype == replica.rtype and r.exit_code not in (None, 0))
    run.finish("Failed", *(
        rules.pytorch_failed_replicas(run.name, failed, replica.rtype) if run.pytorch
        else rules.tf_failed_replicas(run.kind, run.namespace, run.name, failed, replica.rtype)))
    return True


def _launcher_failed(run, replica: Replica, code: int) -> bool:
    """The launcher is a batch/v1 Job's pod: the Job retries it up to its backoffLimit."""
    limit = run.run_policy.get("backoffLimit")
    limit = rules.JOB_DEFAULT_BACKOFF_LIMIT if limit is None else limit
    if replica.policy == "OnFailure":
        if rules.job_past_backoff_limit_on_failure(limit, replica.restart_count + 1):
            run.finish("Failed", *rules.mpi_failed_backoff(None))
            return True
        restart_in_place(run, replica, code)
        return False
    run.pod_terminated(replica)
    replica.failed_pods += 1
    if rules.job_past_backoff_limit_never(limit, replica.failed_pods):
        run.finish("Failed", *rules.mpi_failed_backoff(""))
        return True
    run.replace_pod(replica)  # the Job's next pod: a new name
    run.wait(run.op.pending_seconds)
    run.start(replica)
    return False


def restart_in_place(run, replica: Replica, code: int) -> None:
    """The kubelet restarts the container: same pod, restartCount + 1, a new log."""
    run.wait(RESTART_DELAY_SECONDS)
    replica.restart_count += 1
    run.store.restart_container(replica.pod_key, replica.pod_uid,
                                lambda p: pod_objects.restart_container(p, code))
    run.start(replica)
