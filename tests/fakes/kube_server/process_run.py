"""What every job run of the test operators shares: its thread, its processes, its object's life."""

from __future__ import annotations

import tempfile
import threading
from typing import List, Optional

from fakes.kube_server import pods as pod_objects
from fakes.kube_server.replica_process import Replica, kill_all
from fakes.kube_server.store import NotFound, ObjectKey


class Deleted(Exception):
    """The job was deleted (or replaced by a new object of the same name)."""


class ProcessRun:
    """One job object followed on `thread` (`_run`), whose replicas are local processes."""

    def __init__(self, operator, key: ObjectKey, obj: dict, thread_name: str):
        self.op, self.store, self.key = operator, operator.store, key
        self.name, self.namespace = key[4], key[3]
        self.uid = obj["metadata"]["uid"]
        self.replicas: List[Replica] = []
        self.started_at = 0.0
        self.scratch = tempfile.mkdtemp(prefix=f"kfdist-pods-{self.name}-")
        self.kill_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"{thread_name}-{self.name}",
                                       daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def update_object(self, mutate) -> None:
        """Updates the job object, unless it was replaced by another of the same name."""
        def guarded(obj: dict) -> None:
            if obj["metadata"]["uid"] != self.uid:
                raise Deleted()
            mutate(obj)
        self.store.update(self.key, guarded)

    def wait(self, seconds: float) -> None:
        """Sleeps `seconds`; raises `Deleted` when the job went away meanwhile."""
        if self.op._stopped.wait(seconds):
            raise Deleted()
        try:
            if self.store.get(self.key)["metadata"]["uid"] != self.uid:
                raise Deleted()
        except NotFound:
            raise Deleted() from None

    def terminate_pod(self, replica: Replica) -> None:
        """The replica's pod ends with its exit code (Succeeded or Failed); its log closes."""
        code = replica.exit_code
        try:
            self.store.update(replica.pod_key, lambda p: pod_objects.terminate(
                p, "Completed" if code == 0 else "Error", code))
        except NotFound:
            pass
        self.store.close_log(replica.pod_uid)

    def kill_all(self, replicas: Optional[List[Replica]] = None) -> None:
        """Ends the live replica processes (SIGTERM, then SIGKILL): all, or those given."""
        with self.kill_lock:
            kill_all(self.replicas if replicas is None else replicas, self.op.kill_grace_seconds)

    def delete_pods(self, replicas: List[Replica]) -> None:
        for replica in replicas:
            try:
                self.store.delete(replica.pod_key)
            except NotFound:
                pass
