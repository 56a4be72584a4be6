"""A test-side Training Operator (and MPI Operator) running a job's replicas as local processes.

What the Kubeflow Training Operator (v1) and the kubelet do for a TFJob, on
this machine: for every replica of `spec.tfReplicaSpecs` it creates the pod
object (same names, labels and ownerReferences as the scripted `FakeOperator`,
see `pods.for_job`), computes TF_CONFIG in the operator's layout (cluster of
lower-case replica types, the evaluator included, `localhost:<free port>`
instead of `<job>-<type>-<i>.<ns>.svc:2222`; no TF_CONFIG for a one-replica
job), and
starts the `tensorflow` container's `command` + `args` (`python` is this
interpreter) with the container's `env`, TF_CONFIG, and this process's
environment (STORAGE_EMULATOR_HOST, PYTHONPATH, ... plus `env` overrides).

Each process's output (stdout and stderr, as a container log has both) is
appended line by line to its pod's log in the store, so a followed
`pods/log` stream sees it live. Pods move Pending → Running →
Succeeded/Failed (exit code in `containerStatuses[].state.terminated`); the
job gets Created, Running, then:

* Succeeded (`TFJobSucceeded`) when the Chief exits 0, or, without a Chief,
  when worker 0 exits 0 (`successPolicy: AllWorkers`: when every worker has);
* Failed (`TFJobFailed`, "TFJob ns/name has failed because 1 Worker
  replica(s) failed.") as soon as a replica exits non-zero. Restarts
  (`OnFailure`, `ExitCode`) are not emulated: every replica runs once, as
  with `restartPolicy: Never`.

When the job ends, `runPolicy.cleanPodPolicy` applies as the operator does it:
`Running` (the default) kills the replicas still running and deletes their
pods, `All` deletes every pod, `None` keeps the pods (their processes are
killed all the same: nothing may outlive a test). Deleting the job kills its
processes; the store's garbage collection deletes the pods. `stop()` kills
every process this operator started.

An MPIJob (kubeflow.org/v2beta1) gets its Launcher and Worker pods; the
workers' containers would only run sshd, so they just turn Running, and the
launcher's command (`mpirun ...`) runs here, starting every rank on this
machine. The job is Succeeded (`MPIJobSucceeded`) when the launcher exits 0,
Failed (`BackoffLimitExceeded`, the launcher Job's reason) when it does not.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Deque, Dict, List, Mapping, Optional

from kfdist.components.train_distributed.local.local_backend import free_ports
from kube_server import pods as pod_objects
from kube_server.store import AlreadyExists, NotFound, ObjectKey, ObjectStore, now_rfc3339

#: The container the operator injects TF_CONFIG into, and whose command runs.
TF_CONTAINER = "tensorflow"
#: Variables of this process that a replica must not inherit.
_NOT_INHERITED = ("TF_CONFIG", "KFDIST_LAUNCHER_PID", "KUBECONFIG")
_TYPE_ORDER = ("Chief", "Master", "PS", "Worker", "Evaluator")


@dataclasses.dataclass
class _Replica:
    """One pod of the job and the process playing its container."""

    rtype: str  # as the spec spells it: `Worker`
    index: int
    pod_key: ObjectKey
    pod_uid: str
    process: Optional[subprocess.Popen] = None
    reader: Optional[threading.Thread] = None
    exit_code: Optional[int] = None
    tail: Deque[str] = dataclasses.field(default_factory=lambda: collections.deque(maxlen=50))

    @property
    def label(self) -> str:
        return f"{self.rtype.lower()}-{self.index}"


class _Deleted(Exception):
    """The job was deleted (or replaced by a new object of the same name)."""


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
        #: job name -> time.monotonic() when its terminal condition was stored.
        self.terminal_at: Dict[str, float] = {}
        self._lock = threading.Lock()
        self._runs: List["_JobRun"] = []
        self._stopped = threading.Event()
        store.on_create.append(self._on_create)

    def pids(self) -> List[int]:
        """Every replica process started so far (running or not)."""
        with self._lock:
            runs = list(self._runs)
        return [r.process.pid for run in runs for r in run.replicas if r.process is not None]

    def running_pids(self) -> List[int]:
        """The replica processes that have not exited yet."""
        with self._lock:
            runs = list(self._runs)
        return [r.process.pid for run in runs for r in run.replicas
                if r.process is not None and r.process.poll() is None]

    def replica_output(self, job_name: str, label: str) -> List[str]:
        """The last lines a replica (`worker-1`) of the named job printed, newest last."""
        with self._lock:
            runs = [run for run in self._runs if run.name == job_name]
        return [line for run in runs for r in run.replicas if r.label == label for line in r.tail]

    def stop(self) -> None:
        """Kills every process started (SIGTERM, then SIGKILL) and ends every job thread."""
        self._stopped.set()
        if self._on_create in self.store.on_create:
            self.store.on_create.remove(self._on_create)
        with self._lock:
            runs = list(self._runs)
        for run in runs:
            run.kill_all()
        for run in runs:
            run.thread.join(timeout=self.kill_grace_seconds + 5)

    def _on_create(self, key: ObjectKey, job: dict) -> None:
        if key[2] not in ("tfjobs", "mpijobs") or self._stopped.is_set():
            return
        run = _JobRun(self, key, job)
        with self._lock:
            self._runs.append(run)
        run.thread.start()


class _JobRun:
    """The life of one TFJob: pods, processes, status; runs on `thread`."""

    def __init__(self, operator: ProcessOperator, key: ObjectKey, job: dict):
        self.op, self.store, self.key = operator, operator.store, key
        self.name, self.namespace = key[4], key[3]
        self.uid = job["metadata"]["uid"]
        self.job = job
        self.kind = job["kind"]
        self.mpi = self.kind == "MPIJob"
        self.who = f"{self.kind} {self.namespace}/{self.name}"
        self.replicas: List[_Replica] = []
        self.scratch = tempfile.mkdtemp(prefix=f"kfdist-pods-{self.name}-")
        self._kill_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"process-operator-{self.name}",
                                       daemon=True)

    # The job thread -------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._create_pods()
            self._condition("Created", f"{self.kind}Created", f"{self.kind} {self.name} is created.")
            self._wait(self.op.pending_seconds)
            self._start_processes()
            self._condition("Running", f"{self.kind}Running", f"{self.who} is running.")
            self._supervise()
        except (_Deleted, NotFound):
            self.kill_all()
            self._delete_pods()
        except Exception as error:  # a broken job spec: fail the job, as a webhook would refuse it
            self.kill_all()
            try:
                self._condition("Failed", f"{self.kind}Failed", f"{self.who} could not run: {error}")
            except (_Deleted, NotFound):
                pass
            raise
        finally:
            self.kill_all()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _create_pods(self) -> None:
        for pod_key, pod in pod_objects.for_job(self.key, self.job):
            labels = pod["metadata"]["labels"]
            rtype = pod_objects.replica_type(pod)
            try:
                created = self.store.create(pod_key, pod)
            except AlreadyExists:
                created = self.store.get(pod_key)
            self.replicas.append(_Replica(rtype, int(labels.get(pod_objects.REPLICA_INDEX_LABEL, 0)),
                                          pod_key, created["metadata"]["uid"]))
        order = {t: i for i, t in enumerate(_TYPE_ORDER)}
        self.replicas.sort(key=lambda r: (order.get(r.rtype, len(order)), r.index))

    def _tf_configs(self) -> Dict[str, Optional[str]]:
        """TF_CONFIG by replica label; None for all when the job has one replica (or is an MPIJob)."""
        if len(self.replicas) == 1 or self.mpi:
            return {r.label: None for r in self.replicas}
        ports = iter(free_ports(len(self.replicas)))
        cluster: Dict[str, List[str]] = {}
        for r in self.replicas:
            cluster.setdefault(r.rtype.lower(), []).append(f"localhost:{next(ports)}")
        return {r.label: json.dumps({"cluster": dict(sorted(cluster.items())),
                                     "task": {"type": r.rtype.lower(), "index": r.index},
                                     "environment": "cloud"}, separators=(",", ":"))
                for r in self.replicas}

    def _start_processes(self) -> None:
        tf_configs = self._tf_configs()
        for replica in self.replicas:
            pod = self.store.get(replica.pod_key)
            if self.mpi and replica.rtype == "Worker":  # sshd only: the launcher's mpirun runs the ranks
                self.store.update(replica.pod_key, pod_objects.start_running)
                continue
            container = _tf_container(pod)
            env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
            env.update({e["name"]: str(e.get("value", "")) for e in container.get("env") or []})
            env.update(self.op.env)
            if tf_configs[replica.label] is not None:
                env["TF_CONFIG"] = tf_configs[replica.label]
            argv = [*(container.get("command") or []), *(container.get("args") or [])]
            if not argv:
                raise ValueError(f"{self.who}: container {TF_CONTAINER} has no command "
                                 "(the image entrypoint cannot run locally)")
            argv = [sys.executable if arg in ("python", "python3") else arg for arg in argv]
            workdir = os.path.join(self.scratch, replica.label)
            os.makedirs(workdir, exist_ok=True)
            with self._kill_lock:
                if self.op._stopped.is_set():
                    raise _Deleted()
                replica.process = subprocess.Popen(
                    argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                    errors="replace", start_new_session=True)
            replica.reader = threading.Thread(target=self._stream, args=(replica,),
                                              name=f"log-{self.name}-{replica.label}", daemon=True)
            replica.reader.start()
            self.store.update(replica.pod_key, pod_objects.start_running)

    def _stream(self, replica: _Replica) -> None:
        for line in replica.process.stdout:
            line = line.rstrip("\n")
            replica.tail.append(line)
            self.store.append_log(replica.pod_uid, line)

    def _supervise(self) -> None:
        while True:
            self._wait(self.op.poll_seconds)
            exited = [r for r in self.replicas if r.exit_code is None and r.process is not None
                      and r.process.poll() is not None]
            for replica in exited:
                self._container_exited(replica)
            if not exited:
                continue
            failed = [r for r in self.replicas if r.exit_code not in (None, 0)]
            if failed and self.mpi:
                return self._finish("Failed", "BackoffLimitExceeded/Error",
                                    f"Job has reached the specified backoff limit: launcher "
                                    f"exited with code {failed[0].exit_code}")
            if failed:
                rtype = failed[0].rtype
                count = sum(1 for r in failed if r.rtype == rtype)
                return self._finish("Failed", "TFJobFailed",
                                    f"{self.who} has failed because {count} {rtype} "
                                    f"replica(s) failed.")
            if self._succeeded():
                return self._finish("Succeeded", f"{self.kind}Succeeded",
                                    f"{self.who} successfully completed.")

    def _succeeded(self) -> bool:
        done = {r.label for r in self.replicas if r.exit_code == 0}
        if self.mpi:
            return "launcher-0" in done
        chiefs = [r for r in self.replicas if r.rtype in ("Chief", "Master")]
        if chiefs:
            return all(r.label in done for r in chiefs)
        workers = [r for r in self.replicas if r.rtype == "Worker"]
        if self.job["spec"].get("successPolicy") == "AllWorkers":
            return all(r.label in done for r in workers)
        return "worker-0" in done or all(r.label in done for r in workers)

    def _container_exited(self, replica: _Replica) -> None:
        code = replica.process.wait()
        replica.exit_code = code if code >= 0 else 128 - code  # killed by a signal: 128 + n
        if replica.reader is not None:
            replica.reader.join(timeout=10)  # every line is in the log before it closes
        reason = "Completed" if replica.exit_code == 0 else "Error"
        try:
            self.store.update(replica.pod_key,
                              lambda p: pod_objects.terminate(p, reason, replica.exit_code))
        except NotFound:
            pass
        self.store.close_log(replica.pod_uid)
        self._update_replica_statuses()

    def _finish(self, ctype: str, reason: str, message: str) -> None:
        self.op.terminal_at[self.name] = time.monotonic()
        self._condition(ctype, reason, message)
        policy = (self.job["spec"].get("runPolicy") or {}).get("cleanPodPolicy") or "Running"
        still_running = [r for r in self.replicas if r.exit_code is None]
        self.kill_all()
        for replica in self.replicas if policy == "All" else still_running:
            if policy in ("Running", "All"):
                self._delete_pod(replica)
            elif replica.exit_code is None and replica.process is not None:
                self._container_exited(replica)

    # Status ---------------------------------------------------------------------

    def _condition(self, ctype: str, reason: str, message: str) -> None:
        def add(job: dict) -> None:
            pod_objects.set_job_condition(job, ctype, reason, message, self._replica_statuses(),
                                          now_rfc3339())
        self._update_job(add)

    def _update_replica_statuses(self) -> None:
        def set_counts(job: dict) -> None:
            job.setdefault("status", {})["replicaStatuses"] = self._replica_statuses()
        self._update_job(set_counts)

    def _replica_statuses(self) -> Dict[str, Dict[str, int]]:
        pods = []
        for replica in self.replicas:
            try:
                pods.append(self.store.get(replica.pod_key))
            except NotFound:
                pass
        return pod_objects.replica_statuses(pods)

    def _update_job(self, mutate) -> None:
        def guarded(job: dict) -> None:
            if job["metadata"]["uid"] != self.uid:
                raise _Deleted()
            mutate(job)
        self.store.update(self.key, guarded)

    def _wait(self, seconds: float) -> None:
        if self.op._stopped.wait(seconds):
            raise _Deleted()
        try:
            if self.store.get(self.key)["metadata"]["uid"] != self.uid:
                raise _Deleted()
        except NotFound:
            raise _Deleted() from None

    # Clean-up -------------------------------------------------------------------

    def kill_all(self) -> None:
        """SIGTERM every live replica's process group, SIGKILL after the grace, reap all."""
        with self._kill_lock:
            live = [r for r in self.replicas if r.process is not None and r.process.poll() is None]
            for r in live:
                _signal_group(r.process.pid, signal.SIGTERM)
            deadline = time.monotonic() + self.op.kill_grace_seconds
            for r in live:
                try:
                    r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _signal_group(r.process.pid, signal.SIGKILL)
                    r.process.wait()
        for r in self.replicas:
            if r.reader is not None and r.reader is not threading.current_thread():
                r.reader.join(timeout=5)

    def _delete_pod(self, replica: _Replica) -> None:
        try:
            self.store.delete(replica.pod_key)
        except NotFound:
            pass

    def _delete_pods(self) -> None:
        for replica in self.replicas:
            self._delete_pod(replica)


def _tf_container(pod: Dict[str, Any]) -> Dict[str, Any]:
    containers = pod["spec"]["containers"]
    for container in containers:
        if container["name"] == TF_CONTAINER:
            return container
    return containers[0]


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
