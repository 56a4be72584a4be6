"""The operators' decisions, as pure functions, transcribed from their Go sources.

Training Operator v1.9.0 (TFJob; `pkg/controller.v1/common/{pod,job}.go`,
`pkg/core/{pod,job}.go`, `pkg/controller.v1/tensorflow/tfjob_controller.go`,
`pkg/util/train/train_util.go`; PyTorchJob: `pkg/controller.v1/pytorch/{envvar,master,
pytorchjob_controller}.go`) and MPI Operator v0.8 (MPIJob v2beta1;
`pkg/controller/mpi_job_controller.go`, and the batch/v1 Job controller that
runs its launcher). The process operator plays the job's life with these.
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional

#: `SetDefaults_TFJob` / MPI `default.go`: what an unset field means.
TF_DEFAULT_RESTART_POLICY = "Never"
MPI_DEFAULT_LAUNCHER_RESTART_POLICY = "OnFailure"
MPI_DEFAULT_WORKER_RESTART_POLICY = "Never"
DEFAULT_CLEAN_POD_POLICY = "None"  # both operators, whatever the v2beta1 comment says
JOB_DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 Job, used by the MPI launcher when runPolicy has none

RESTART = "restart"  # the operator deletes the pod and creates it again (new uid)
RESTART_IN_PLACE = "restart-in-place"  # the kubelet restarts the container (restartCount + 1)
FAIL = "fail"


def is_retryable_exit_code(code: int) -> bool:
    """`IsRetryableExitCode`: `exitCode >= 128`."""
    return code >= 128


def pod_restart_policy(replica_policy: str) -> str:
    """`core.SetRestartPolicy`: ExitCode runs the pod with `Never`; others are copied."""
    return "Never" if replica_policy == "ExitCode" else replica_policy


def tf_on_container_exit(replica_policy: str, code: int) -> str:
    """What happens to a TFJob replica whose `tensorflow` container exited non-zero.

    `OnFailure`/`Always`: the kubelet restarts the container in place (the pod
    never reaches Failed). `ExitCode`: the pod (restartPolicy Never) fails and
    `ReconcilePods` deletes it for a retryable code, to be created again; a
    permanent code fails the job. `Never`: `UpdateJobStatus` fails the job.
    """
    if replica_policy in ("OnFailure", "Always"):
        return RESTART_IN_PLACE
    if replica_policy == "ExitCode" and is_retryable_exit_code(code):
        return RESTART
    return FAIL


def tf_past_backoff_limit(backoff_limit: Optional[int], restart_counts: Iterable[int]) -> bool:
    """`core.PastBackoffLimit`: the containers' restartCount of Running pods of replicas
    under OnFailure/Always/ExitCode (ExitCode pods run with Never: always 0)."""
    if backoff_limit is None:
        return False
    total = sum(restart_counts)
    return total > 0 if backoff_limit == 0 else total >= backoff_limit


def tf_new_failure_exceeds_zero_limit(backoff_limit: Optional[int], active: int, total: int) -> bool:
    """`ReconcileJobs`' second trigger: the work queue's requeue count is always 0 for
    TFJob, so a new Failed pod while not all replicas are active fails only `backoffLimit: 0`."""
    return backoff_limit == 0 and active != total


def tf_succeeded(replica_exit_codes: Dict[str, Optional[int]], success_policy: str) -> bool:
    """`UpdateJobStatus`: Chief/Master decide when present; else worker 0 (exit 0), or,
    under `AllWorkers` or when worker 0 has not, every worker.

    Args:
      replica_exit_codes: Exit code by label (`chief-0`, `worker-1`); None while running.
      success_policy: `""` or `AllWorkers`.
    """
    chiefs = [c for label, c in replica_exit_codes.items() if label.startswith(("chief-", "master-"))]
    if chiefs:
        return all(c == 0 for c in chiefs)
    workers = [c for label, c in replica_exit_codes.items() if label.startswith("worker-")]
    all_done = bool(workers) and all(c == 0 for c in workers)
    if success_policy == "AllWorkers":
        return all_done
    return replica_exit_codes.get("worker-0") == 0 or all_done


def job_past_backoff_limit_on_failure(backoff_limit: int, restart_count: int) -> bool:
    """batch/v1 Job, pods `OnFailure`: failed once the restarts reach the limit."""
    return restart_count >= backoff_limit


def job_past_backoff_limit_never(backoff_limit: int, failed_pods: int) -> bool:
    """batch/v1 Job, pods `Never`: failed once more pods failed than the limit."""
    return failed_pods > backoff_limit


# Conditions: (reason, message) as the operators format them ------------------------------

def tf_created(kind: str, name: str):
    return f"{kind}Created", f"{kind} {name} is created."


def tf_running(kind: str, namespace: str, name: str):
    return f"{kind}Running", f"{kind} {namespace}/{name} is running."


def tf_restarting(kind: str, name: str, rtype: str):
    return f"{kind}Restarting", f"job {name} is restarting because {rtype} replica(s) failed."


def tf_succeeded_condition(kind: str, namespace: str, name: str):
    return f"{kind}Succeeded", f"{kind} {namespace}/{name} successfully completed."


def tf_failed_replicas(kind: str, namespace: str, name: str, count: int, rtype: str):
    return f"{kind}Failed", f"{kind} {namespace}/{name} has failed because {count} {rtype} replica(s) failed."


def tf_failed_permanent_exit_code(kind: str, name: str, rtype: str):
    return f"{kind}Failed", f'job "{name}" is failing because "{rtype}" replica(s) failed.'


def tf_failed_backoff(kind: str, name: str):
    return f"{kind}Failed", f"Job {name} has failed because it has reached the specified backoff limit"


def tf_failed_deadline(kind: str, name: str):
    return f"{kind}Failed", f"Job {name} has failed because it was active longer than specified deadline"


# PyTorchJob (`pytorchjob_controller.go` UpdateJobStatus): its own wording, no namespace.

def pytorch_running(name: str):
    return "PyTorchJobRunning", f"PyTorchJob {name} is running."


def pytorch_succeeded(name: str):
    return "PyTorchJobSucceeded", f"PyTorchJob {name} is successfully completed."


def pytorch_restarting(name: str, count: int, rtype: str):
    return "PyTorchJobRestarting", f"PyTorchJob {name} is restarting because {count} {rtype} replica(s) failed."


def pytorch_failed_replicas(name: str, count: int, rtype: str):
    return "PyTorchJobFailed", f"PyTorchJob {name} is failed because {count} {rtype} replica(s) failed."


def pytorch_succeeded_now(exit_codes: Dict[str, Optional[int]]) -> bool:
    """The job succeeds when its master succeeds; without a master, when every worker has."""
    if any(label.startswith("master-") for label in exit_codes):
        return exit_codes.get("master-0") == 0
    return all(code == 0 for code in exit_codes.values())


def pytorch_env(job: dict, rtype: str, index: int, master_addr: str, master_port: int) -> Dict[str, str]:
    """What `setPodEnv` (`envvar.go`, `master.go`) adds to every container of a replica's pod.

    MASTER_ADDR is the master's Service (`<job>-master-0`) and MASTER_PORT its container port
    named `pytorchjob-port`; here, where the replicas share this machine, the caller passes
    `localhost` and a free port fixed for the job's life."""
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(int(r.get("replicas", 1)) for r in replicas.values())
    nproc = spec.get("nprocPerNode")
    env = {"PYTHONUNBUFFERED": "1"}
    if "Master" in replicas:
        rank = index + 1 if rtype == "Worker" else index
        per_node = int(nproc) if nproc is not None and str(nproc).isdigit() else 1
        env.update({"MASTER_PORT": str(master_port), "PET_MASTER_PORT": str(master_port),
                    "MASTER_ADDR": master_addr, "PET_MASTER_ADDR": master_addr,
                    "WORLD_SIZE": str(total * per_node), "RANK": str(rank),
                    "PET_NODE_RANK": str(rank)})
    if nproc is not None:
        env["PET_NPROC_PER_NODE"] = str(nproc)
    if spec.get("elasticPolicy") is None:
        env["PET_NNODES"] = str(total)
    return env


def mpi_failed_backoff(last_failed_pod_reason: Optional[str]):
    """The launcher Job's BackoffLimitExceeded, as `updateMPIJobFailedStatus` extends it."""
    reason = "BackoffLimitExceeded"
    if last_failed_pod_reason is not None:
        reason += "/" + last_failed_pod_reason
    return reason, "Job has reached the specified backoff limit"


def mpi_failed_deadline():
    return "DeadlineExceeded", "Job was active longer than specified deadline"


def suspended(kind: str, namespace: str, name: str):
    """Suspended=True (reason, message): Training Operator `TFJob <name> is suspended.`
    (common/job.go), MPI Operator `MPIJob suspended` (mpi_job_controller.go)."""
    if kind == "MPIJob":
        return "MPIJobSuspended", "MPIJob suspended"
    return f"{kind}Suspended", f"{kind} {name} is suspended."


def resumed(kind: str, namespace: str, name: str):
    """Suspended=False on resume."""
    if kind == "MPIJob":
        return "MPIJobResumed", "MPIJob resumed"
    return f"{kind}Resumed", f"{kind} {name} is resumed."


def mpi_running_while_suspended(namespace: str, name: str):
    """The MPI Operator also writes Running=False while suspended."""
    return "MPIJobSuspended", f"MPIJob {namespace}/{name} is suspended."
