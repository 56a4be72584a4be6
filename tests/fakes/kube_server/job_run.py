"""The life of one TFJob or MPIJob under the process operator, decided by `operator_rules`."""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Dict, List, Optional

from kfdist.components.train_distributed.local.ports import free_ports
from fakes.kube_server import operator_rules as rules
from fakes.kube_server import pods as pod_objects
from fakes.kube_server.process_run import Deleted, ProcessRun  # noqa: F401  (Deleted re-exported)
from fakes.kube_server.replica_process import Replica, main_container
from fakes.kube_server.store import AlreadyExists, NotFound, ObjectKey, now_rfc3339

_TYPE_ORDER = ("Chief", "Master", "PS", "Worker", "Evaluator", "Launcher")
#: Where each kind keeps its replica specs.
REPLICA_SPECS = {"TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
                 "PyTorchJob": "pytorchReplicaSpecs"}


class JobRun(ProcessRun):
    """One job: its pods, their processes and its status; runs on `thread`."""

    def __init__(self, operator, key: ObjectKey, job: dict):
        super().__init__(operator, key, job, "process-operator")
        self.job = job
        self.kind = job["kind"]
        self.mpi = self.kind == "MPIJob"
        self.pytorch = self.kind == "PyTorchJob"
        self.who = f"{self.kind} {self.namespace}/{self.name}"
        self.run_policy = job["spec"].get("runPolicy") or {}
        self.injected: Dict[str, Dict[str, str]] = {}

    # The job thread -------------------------------------------------------------

    def _run(self) -> None:
        try:
            self.condition("Created", *rules.tf_created(self.kind, self.name))
            self._hold_while_suspended()
            self._create_pods()
            self.wait(self.op.pending_seconds)
            self.started_at = time.monotonic()
            self.injected = self._injected_env()
            for replica in self.replicas:
                self.start(replica)
            self.condition("Running", *self.running_condition())
            self._supervise()
        except (Deleted, NotFound):
            self.kill_all()
            self.delete_pods(self.replicas)
        except Exception as error:  # a broken job spec: fail the job, as a webhook would refuse it
            self.kill_all()
            try:
                self.condition("Failed", f"{self.kind}Failed", f"{self.who} could not run: {error}")
            except (Deleted, NotFound):
                pass
            raise
        finally:
            self.kill_all()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _hold_while_suspended(self) -> None:
        """No pods while `runPolicy.suspend` (Kueue's hold): Suspended, then Resumed."""
        def is_suspended() -> bool:
            return bool((self.store.get(self.key)["spec"].get("runPolicy") or {}).get("suspend"))
        if not is_suspended():
            return
        who = (self.kind, self.namespace, self.name)
        if self.mpi:
            self.condition("Running", *rules.mpi_running_while_suspended(self.namespace, self.name),
                           status="False")
        self.condition("Suspended", *rules.suspended(*who))
        while is_suspended():
            self.wait(self.op.poll_seconds)
        self.job = self.store.get(self.key)
        self.run_policy = self.job["spec"].get("runPolicy") or {}
        self.condition("Suspended", *rules.resumed(*who), status="False")

    def _replica_specs(self) -> dict:
        return self.job["spec"][REPLICA_SPECS[self.kind]]

    def _policy(self, rtype: str) -> str:
        default = rules.TF_DEFAULT_RESTART_POLICY
        if self.mpi:
            default = (rules.MPI_DEFAULT_LAUNCHER_RESTART_POLICY if rtype == "Launcher"
                       else rules.MPI_DEFAULT_WORKER_RESTART_POLICY)
        return self._replica_specs()[rtype].get("restartPolicy") or default

    def _new_pod(self, rtype: str, index: int) -> dict:
        """A pod for slot (`rtype`, `index`): the operator's object, stored; returns it."""
        for pod_key, pod in pod_objects.for_job(self.key, self.job):
            if pod_objects.replica_type(pod) == rtype and int(
                    pod["metadata"]["labels"].get(pod_objects.REPLICA_INDEX_LABEL, 0)) == index:
                pod["spec"]["restartPolicy"] = rules.pod_restart_policy(self._policy(rtype))
                try:
                    return self.store.create(pod_key, pod)
                except AlreadyExists:
                    return self.store.get(pod_key)
        raise ValueError(f"{self.who} has no replica {rtype} {index}")

    def _create_pods(self) -> None:
        for _, pod in pod_objects.for_job(self.key, self.job):
            rtype = pod_objects.replica_type(pod)
            index = int(pod["metadata"]["labels"].get(pod_objects.REPLICA_INDEX_LABEL, 0))
            created = self._new_pod(rtype, index)
            self.replicas.append(Replica(rtype, index, self._policy(rtype),
                                         _key_of(created), created["metadata"]["uid"]))
        order = {t: i for i, t in enumerate(_TYPE_ORDER)}
        self.replicas.sort(key=lambda r: (order.get(r.rtype, len(order)), r.index))

    def _injected_env(self) -> Dict[str, Dict[str, str]]:
        """What the operator injects, by replica label, fixed for the job's life (a re-created
        pod keeps its address, as its Service does): TF_CONFIG (none in a one-replica job),
        the PyTorch variables, nothing for an MPIJob."""
        if self.pytorch:
            port = free_ports(1)[0]
            return {r.label: rules.pytorch_env(self.job, r.rtype, r.index, "localhost", port)
                    for r in self.replicas}
        if len(self.replicas) == 1 or self.mpi:
            return {r.label: {} for r in self.replicas}
        ports = iter(free_ports(len(self.replicas)))
        cluster: Dict[str, List[str]] = {}
        for r in self.replicas:
            cluster.setdefault(r.rtype.lower(), []).append(f"localhost:{next(ports)}")
        return {r.label: {"TF_CONFIG": json.dumps(
            {"cluster": dict(sorted(cluster.items())),
             "task": {"type": r.rtype.lower(), "index": r.index}, "environment": "cloud"},
            separators=(",", ":"))} for r in self.replicas}

    def running_condition(self):
        """The operator's Running reason and message for this kind."""
        if self.pytorch:
            return rules.pytorch_running(self.name)
        return rules.tf_running(self.kind, self.namespace, self.name)

    def start(self, replica: Replica) -> None:
        """Starts the replica's container in its current pod, which turns Running."""
        if self.mpi and replica.rtype == "Worker":  # sshd only: the launcher's mpirun runs the ranks
            self.store.update(replica.pod_key, pod_objects.start_running)
            return
        pod = self.store.get(replica.pod_key)
        with self.kill_lock:
            if self.op._stopped.is_set():
                raise Deleted()
            replica.start(self.store, main_container(pod, self.kind), self.op.env,
                          self.injected[replica.label],
                          os.path.join(self.scratch, replica.label))
        if replica.restart_count == 0:
            self.store.update(replica.pod_key, pod_objects.start_running)

    def _supervise(self) -> None:
        from fakes.kube_server.job_exits import handle_exit

        while True:
            self.wait(self.op.poll_seconds)
            deadline = self.run_policy.get("activeDeadlineSeconds")
            if deadline is not None and time.monotonic() - self.started_at >= deadline:
                reason, message = (rules.mpi_failed_deadline() if self.mpi
                                   else rules.tf_failed_deadline(self.kind, self.name))
                return self.finish("Failed", reason, message, delete_all=True)
            for replica in [r for r in self.replicas if r.exited()]:
                if handle_exit(self, replica):
                    return
            if self._succeeded():
                return self.finish("Succeeded", *(
                    rules.pytorch_succeeded(self.name) if self.pytorch
                    else rules.tf_succeeded_condition(self.kind, self.namespace, self.name)))

    def _succeeded(self) -> bool:
        codes = {r.label: r.exit_code for r in self.replicas}
        if self.mpi:
            return codes.get("launcher-0") == 0
        if self.pytorch:
            return rules.pytorch_succeeded_now(codes)
        return rules.tf_succeeded(codes, self.job["spec"].get("successPolicy") or "")

    def finish(self, ctype: str, reason: str, message: str, delete_all: bool = False) -> None:
        """Ends the job with condition `ctype`; cleanPodPolicy (or, past the backoff limit or
        the deadline, everything) decides which pods go. Nothing outlives it."""
        if delete_all:  # the operator deletes everything first, then writes the condition
            self.kill_all()
            self.delete_pods(self.replicas)
            return self.condition(ctype, reason, message)
        self.condition(ctype, reason, message)
        policy = self.run_policy.get("cleanPodPolicy") or rules.DEFAULT_CLEAN_POD_POLICY
        still_running = [r for r in self.replicas if r.exit_code is None]
        self.kill_all()
        cleaned = [r for r in self.replicas if not (self.mpi and r.rtype == "Launcher")]
        if policy == "All":
            self.delete_pods(cleaned)
        elif policy == "Running":
            self.delete_pods([r for r in still_running if r in cleaned])
        for replica in still_running:
            if replica.process is not None and replica.exit_code is None:
                replica.collect_exit()
                self.pod_terminated(replica)

    # Status ---------------------------------------------------------------------

    def pod_terminated(self, replica: Replica) -> None:
        """The replica's pod ends with its exit code; the job's replica statuses follow."""
        self.terminate_pod(replica)
        self.update_replica_statuses()

    def condition(self, ctype: str, reason: str, message: str, status: str = "True") -> None:
        """Sets a job condition as the operator does (`pods.set_job_condition`)."""
        def add(job: dict) -> None:
            pod_objects.set_job_condition(job, ctype, reason, message, self._replica_statuses(),
                                          now_rfc3339(), status)
        self.update_object(add)

    def update_replica_statuses(self) -> None:
        def set_counts(job: dict) -> None:
            job.setdefault("status", {})["replicaStatuses"] = self._replica_statuses()
        self.update_object(set_counts)

    def _replica_statuses(self) -> Dict[str, Dict[str, int]]:
        pods = []
        for replica in self.replicas:
            try:
                pods.append(self.store.get(replica.pod_key))
            except NotFound:
                pass
        return pod_objects.replica_statuses(pods)

    def replace_pod(self, replica: Replica) -> None:
        """Deletes the replica's pod and creates it again (new uid, a launcher: a new name)."""
        self.delete_pods([replica])
        created = self._new_pod(replica.rtype, replica.index)
        replica.pod_key, replica.pod_uid = _key_of(created), created["metadata"]["uid"]
        replica.restart_count = 0

    # Clean-up -------------------------------------------------------------------



def _key_of(pod: dict) -> ObjectKey:
    return ("", "v1", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
