"""Test-side Training Operator, MPI Operator and Kubeflow Trainer running a job's replicas as local processes.

TrainJobs (JobSet, Jobs, pods) are `trainjob_run`'s and `trainjob_life`'s;
what follows is about TFJobs, PyTorchJobs and MPIJobs.

What the Kubeflow Training Operator (v1.9) and the kubelet do for a TFJob,
and the MPI Operator (v0.8) and the batch/v1 Job controller for an MPIJob, on
this machine. For every replica it creates the pod object (same names, labels
and ownerReferences as `pods.for_job`), computes TF_CONFIG in the operator's
layout (lower-case replica types, the evaluator included, `localhost:<port>`
instead of `<job>-<type>-<i>.<ns>.svc:2222`, fixed for the job's life; none
for a one-replica job), and starts the `tensorflow` container's `command` +
`args` (`python` is this interpreter) with the container's `env`, TF_CONFIG,
and this process's environment plus `env` overrides. Output goes line by line
to the pod's log in the store, so a followed `pods/log` stream sees it live.

The decisions are the operators' (`operator_rules`, transcribed from the Go
sources; `job_exits` applies them):

* TFJob `ExitCode`: the pod runs with `Never`; a retryable exit (>= 128) gets
  the pod deleted and created again (new uid) with a `Restarting` condition
  (`TFJobRestarting`), then `Running`; 1-127 fails the job
  (`job "x" is failing because "Worker" replica(s) failed.`).
  `OnFailure`/`Always`: the container restarts in place (restartCount + 1) and
  `backoffLimit` counts those restarts. `Never`: the job fails
  (`TFJob ns/x has failed because 1 Worker replica(s) failed.`).
* Success: the Chief decides; without one worker 0, or every worker under
  `successPolicy: AllWorkers`.
* PyTorchJob: pods `<job>-master-0` and `<job>-worker-<i>`; into every container of a pod the
  operator's variables (`operator_rules.pytorch_env`: MASTER_ADDR/PORT, WORLD_SIZE, RANK and
  PET_*), the master's address `localhost` and its port a free one here; the `pytorch`
  container runs. The job succeeds when the master succeeds (every worker without one);
  its conditions use the PyTorchJob controller's own wording.
* `activeDeadlineSeconds` and an exceeded `backoffLimit` fail the job and
  delete every pod; otherwise `cleanPodPolicy` (default `None`) applies when
  the job ends. Processes never outlive a job.
* MPIJob: the workers' containers would only run sshd, so they just turn
  Running; the launcher's command (`mpirun ...`) runs here and starts every
  rank. The launcher is a batch/v1 Job's pod: `OnFailure` (the default)
  restarts it in place, `Never` creates a new pod, until the Job's
  `backoffLimit` (default 6) is reached: the MPIJob then fails with reason
  `BackoffLimitExceeded`. No `Restarting` condition, as the MPI Operator writes none.

Deleting the job kills its processes; the store's garbage collection deletes
the pods. `stop()` kills every process this operator started.
"""

from __future__ import annotations

import threading
from typing import List, Mapping, Optional

from fakes.kube_server import trainer_rules
from fakes.kube_server.job_run import JobRun
from fakes.kube_server.store import NotFound, ObjectKey, ObjectStore
from fakes.kube_server.trainer_objects import RUNTIMES
from fakes.kube_server.trainjob_run import TrainJobRun


class ProcessOperator:
    """Runs every TFJob created in `store` as local processes, each job on its own thread."""

    def __init__(self, store: ObjectStore, *, env: Optional[Mapping[str, str]] = None,
                 pending_seconds: float = 0.1, poll_seconds: float = 0.05,
                 kill_grace_seconds: float = 3.0):
        """Hooks into `store`.

        Args:
          store: The test API server's store.
          env: Variables set in every replica on top of this process's environment
            (read when the replica starts) and the container's env.
          pending_seconds: How long new pods stay Pending before their processes start.
          poll_seconds: How often exits and deletions are checked.
          kill_grace_seconds: SIGTERM → SIGKILL grace when a replica is killed.
        """
        self.store = store
        self.env = dict(env or {})
        self.pending_seconds = pending_seconds
        self.poll_seconds = poll_seconds
        self.kill_grace_seconds = kill_grace_seconds
        self._lock = threading.Lock()
        self._runs: List[JobRun] = []
        self._stopped = threading.Event()
        store.on_create.append(self._on_create)
        store.admission.append(self._admit)

    def pids(self) -> List[int]:
        """Every replica process started so far (running or not)."""
        with self._lock:
            runs = list(self._runs)
        return [pid for run in runs for r in run.replicas for pid in r.pids]

    def running_pids(self) -> List[int]:
        """The replica processes that have not exited yet."""
        with self._lock:
            runs = list(self._runs)
        return [r.process.pid for run in runs for r in run.replicas
                if r.process is not None and r.process.poll() is None]

    def replica_pids(self, job_name: str, label: str) -> List[int]:
        """Every process that played replica `label` (`worker-1`) of the named job, oldest first."""
        with self._lock:
            runs = [run for run in self._runs if run.name == job_name]
        return [pid for run in runs for r in run.replicas if r.label == label for pid in r.pids]

    def stop(self) -> None:
        """Kills every process started (SIGTERM, then SIGKILL) and ends every job thread."""
        self._stopped.set()
        if self._on_create in self.store.on_create:
            self.store.on_create.remove(self._on_create)
        if self._admit in self.store.admission:
            self.store.admission.remove(self._admit)
        with self._lock:
            runs = list(self._runs)
        for run in runs:
            run.kill_all()
        for run in runs:
            run.thread.join(timeout=self.kill_grace_seconds + 5)

    def _admit(self, route, body: dict) -> Optional[dict]:
        """Trainer's validating webhook: a TrainJob's ClusterTrainingRuntime must exist."""
        if route.plural != "trainjobs":
            return None
        name = ((body.get("spec") or {}).get("runtimeRef") or {}).get("name", "")
        try:
            self.store.get(RUNTIMES + ("", name))
            return None
        except NotFound:
            return trainer_rules.runtime_missing(body)

    def _on_create(self, key: ObjectKey, job: dict) -> None:
        if key[2] not in ("tfjobs", "pytorchjobs", "mpijobs", "trainjobs") or self._stopped.is_set():
            return
        run = TrainJobRun(self, key, job) if key[2] == "trainjobs" else JobRun(self, key, job)
        with self._lock:
            self._runs.append(run)
        run.thread.start()


