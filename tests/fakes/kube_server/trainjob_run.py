"""The life of one TrainJob under the test Trainer controller: its JobSet, Jobs and pods as processes.

What Trainer, JobSet, the Job controller and the kubelet do, on this machine
(`trainer_rules` holds their decisions): the JobSet and a Job per replicated
Job are stored; each Job's pods are created and their `node` container's
command runs (`python` is this interpreter) with the container's env
(downward-API values filled in), `JOB_COMPLETION_INDEX` and this process's
environment. A container that runs `sshd` (Horovod nodes) just turns Running
and Ready. Jobs with `dependsOn` start once their dependency is Ready.

Where a cluster has DNS and one IP per pod, this machine has one host: the
TensorFlow nodes get `KFDIST_NODE_ADDRESSES` (`localhost:<port>` by index,
fixed for the job's life) and the MPI launcher a hostfile of `localhost`
with every node's slots, through the variables Trainer's mpi plugin sets.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Dict, List, Optional

from kfdist.components.train_distributed.job import jobset_cluster
from kfdist.components.train_distributed.local.ports import free_ports
from fakes.kube_server import pods as pod_objects
from fakes.kube_server import trainer_objects as objects
from fakes.kube_server import trainer_rules as rules
from fakes.kube_server.process_run import Deleted, ProcessRun
from fakes.kube_server.replica_process import Replica
from fakes.kube_server.store import NotFound, ObjectKey, now_rfc3339


class JobState:
    """Job 0 of one replicated Job: its spec, pods, failures and outcome."""

    def __init__(self, replicated: dict, key: ObjectKey):
        self.name, self.key = replicated["name"], key
        self.job_name = key[4]
        self.spec = replicated["template"]["spec"]
        self.depends_on = [d["name"] for d in replicated.get("dependsOn") or []]
        self.replicas: List[Replica] = []
        self.failures = 0
        self.succeeded: set = set()
        self.outcome: Optional[str] = None  # "Complete" or "Failed"
        container = self.spec["template"]["spec"]["containers"][0]
        self.sshd = os.path.basename((container.get("command") or [""])[0]) == "sshd"

    @property
    def started(self) -> bool:
        return bool(self.replicas)


class TrainJobRun(ProcessRun):
    """One TrainJob; runs on `thread`. Offers `wait`, `store` and `start` as `job_exits` needs."""

    def __init__(self, operator, key: ObjectKey, trainjob: dict):
        super().__init__(operator, key, trainjob, "trainer")
        self.trainjob = trainjob
        self.jobs: Dict[str, JobState] = {}
        self.env: Dict[str, Dict[str, str]] = {}
        self.jobset: dict = {}

    def _run(self) -> None:
        from fakes.kube_server import trainjob_life

        try:
            runtime_name = self.trainjob["spec"]["runtimeRef"]["name"]
            runtime = self.store.get(objects.RUNTIMES + ("", runtime_name))
            self._create(rules.jobset_spec(self.trainjob, runtime), runtime)
            trainjob_life.hold_while_suspended(self)
            self.started_at = time.monotonic()
            trainjob_life.supervise(self)
        except (Deleted, NotFound):
            pass
        finally:
            self.kill_all()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _create(self, spec: dict, runtime: dict) -> None:
        key, body = objects.jobset(self.trainjob, spec)
        self.jobset = self.store.create(key, body)
        for replicated in spec["replicatedJobs"]:
            job_key, job_body = objects.job(self.jobset, replicated)
            self.store.create(job_key, job_body)
            self.jobs[replicated["name"]] = JobState(replicated, job_key)
        self._prepare_env(runtime)
        self.update_status()

    def _prepare_env(self, runtime: dict) -> None:
        """Per replicated Job: the variables this machine gives in place of DNS and mounts."""
        mpi = (runtime["spec"].get("mlPolicy") or {}).get("mpi")
        for job in self.jobs.values():
            env = dict(self.op.env)
            container = job.spec["template"]["spec"]["containers"][0]
            if any(e["name"] in jobset_cluster.IDENTITY_ENV for e in container.get("env") or []):
                ports = free_ports(job.spec["completions"])
                env[jobset_cluster.NODE_ADDRESSES_ENV] = ",".join(f"localhost:{p}" for p in ports)
            if mpi is not None and job.name == "launcher":
                env.update(self._hostfile_env(mpi))
            if any(e["name"] == "PET_MASTER_ADDR" for e in container.get("env") or []):
                # Node 0's address and the master port, as this machine reaches them.
                env.update({"PET_MASTER_ADDR": "localhost", "PET_MASTER_PORT": str(free_ports(1)[0])})
            self.env[job.name] = env

    def _hostfile_env(self, mpi: dict) -> Dict[str, str]:
        slots = rules.mpi_slots(self.trainjob, {"spec": {"mlPolicy": {"mpi": mpi}}})
        hosts = self.jobs["node"].spec["completions"] + (1 if mpi.get("runLauncherAsNode") else 0)
        path = os.path.join(self.scratch, "hostfile")
        with open(path, "w") as f:
            f.write(f"localhost slots={slots * hosts}\n")
        return {"OMPI_MCA_orte_default_hostfile": path, "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                "OMPI_MCA_orte_set_default_slots": str(slots),
                "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"}

    # Pods --------------------------------------------------------------------------

    def create_pods(self, job: JobState) -> None:
        job_obj = self.store.get(job.key)
        for index in range(job.spec["completions"]):
            created = self._new_pod(job_obj, job, index)
            replica = Replica(job.name, index, created["spec"]["restartPolicy"],
                              _key_of(created), created["metadata"]["uid"])
            job.replicas.append(replica)
            self.replicas.append(replica)

    def _new_pod(self, job_obj: dict, job: JobState, index: int) -> dict:
        key, body = objects.pod(job_obj, job.name, index, self.jobset)
        return self.store.create(key, body)

    def job_of(self, replica: Replica) -> JobState:
        return self.jobs[replica.rtype]

    def start(self, replica: Replica) -> None:
        """Starts the replica's container in its current pod, which turns Running."""
        job = self.job_of(replica)
        if job.sshd:
            self.store.update(replica.pod_key, pod_objects.start_running)
            return
        pod = self.store.get(replica.pod_key)
        container = dict(pod["spec"]["containers"][0])
        container["env"] = objects.resolved_env(container, pod, replica.index)
        with self.kill_lock:
            if self.op._stopped.is_set():
                raise Deleted()
            replica.start(self.store, container, self.env[job.name], {},
                          os.path.join(self.scratch, replica.label))
        if replica.restart_count == 0:
            self.store.update(replica.pod_key, pod_objects.start_running)

    def replace_pod(self, replica: Replica) -> None:
        """The Job controller's next pod for the index: a new name and uid, the same hostname."""
        self.delete_pods([replica])
        job = self.job_of(replica)
        created = self._new_pod(self.store.get(job.key), job, replica.index)
        replica.pod_key, replica.pod_uid = _key_of(created), created["metadata"]["uid"]
        replica.restart_count = 0

    def pod_terminated(self, replica: Replica) -> None:
        self.terminate_pod(replica)

    # Status ------------------------------------------------------------------------

    def set_condition(self, ctype: str, status: str, reason: str, message: str) -> None:
        """`meta.SetStatusCondition`: one condition per type; the transition time moves on a flip."""
        def mutate(obj: dict) -> None:
            conditions = obj.setdefault("status", {}).setdefault("conditions", [])
            old = next((c for c in conditions if c["type"] == ctype), None)
            new = {"type": ctype, "status": status, "reason": reason, "message": message,
                   "lastTransitionTime": now_rfc3339()}
            if old is None:
                conditions.append(new)
            else:
                if old["status"] == status:
                    new["lastTransitionTime"] = old["lastTransitionTime"]
                old.update(new)
            obj["status"]["jobsStatus"] = self._jobs_status()
        self.update_object(mutate)

    def update_status(self) -> None:
        self.update_object(lambda obj: obj.setdefault("status", {}).update(
            jobsStatus=self._jobs_status()))

    def _jobs_status(self) -> list:
        states = []
        for job in self.jobs.values():
            active = job.started and job.outcome is None
            states.append({"name": job.name, "active": int(active), "ready": int(active and all(
                r.running() or self.job_of(r).sshd for r in job.replicas)),
                "succeeded": int(job.outcome == "Complete"), "failed": int(job.outcome == "Failed"),
                "suspended": int(not job.started and bool(self.trainjob["spec"].get("suspend")))})
        return objects.jobs_status(states)

    def jobset_key(self) -> ObjectKey:
        return objects.JOBSETS + (self.namespace, self.name)

    def current(self) -> dict:
        obj = self.store.get(self.key)
        if obj["metadata"]["uid"] != self.uid:
            raise Deleted()
        return obj


def _key_of(pod: dict) -> ObjectKey:
    return objects.PODS + (pod["metadata"]["namespace"], pod["metadata"]["name"])
