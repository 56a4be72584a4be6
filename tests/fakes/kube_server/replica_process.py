"""One replica of a job played by a local process: its pod, its container's process, its log."""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Deque, Dict, List, Mapping, Optional

from kfdist.components.train_distributed.job import exit_codes
from fakes.kube_server.store import ObjectKey, ObjectStore

#: The container the operator treats as the replica's, by job kind (TF_CONFIG goes into it).
MAIN_CONTAINER = {"TFJob": "tensorflow", "PyTorchJob": "pytorch"}
#: Variables of this process that a replica must not inherit.
_NOT_INHERITED = ("TF_CONFIG", "KFDIST_LAUNCHER_PID", "KUBECONFIG", "MASTER_ADDR", "MASTER_PORT",
                  "WORLD_SIZE", "RANK", "LOCAL_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                  "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE")


@dataclasses.dataclass
class Replica:
    """One replica slot of the job (`worker-1`): its current pod and the process playing it.

    Attributes:
      rtype: The replica type as the spec spells it (`Worker`).
      index: Its index.
      policy: Its `restartPolicy` (defaulted).
      pod_key: The current pod (replaced when the operator re-creates it).
      pod_uid: The current pod's uid.
      process: The container's process of the current run.
      exit_code: The last run's exit code; None while it runs.
      restart_count: In-place restarts of the current pod's container (kubelet).
      failed_pods: Launcher pods that ended Failed (an MPIJob's batch Job counts them).
      tail: The last lines printed, across runs.
    """

    rtype: str
    index: int
    policy: str
    pod_key: ObjectKey
    pod_uid: str
    process: Optional[subprocess.Popen] = None
    reader: Optional[threading.Thread] = None
    exit_code: Optional[int] = None
    restart_count: int = 0
    failed_pods: int = 0
    pids: List[int] = dataclasses.field(default_factory=list)
    tail: Deque[str] = dataclasses.field(default_factory=lambda: collections.deque(maxlen=50))

    @property
    def label(self) -> str:
        return f"{self.rtype.lower()}-{self.index}"

    def start(self, store: ObjectStore, container: Dict[str, Any], env_overrides: Mapping[str, str],
              injected: Mapping[str, str], workdir: str) -> None:
        """Starts the container's command + args (`python` is this interpreter), streaming its log.

        `injected` is what the operator adds to the container's env (TF_CONFIG, the PyTorch
        variables); `env_overrides` are the test's."""
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update({e["name"]: str(e.get("value", "")) for e in container.get("env") or []})
        env.update(env_overrides)
        env.update(injected)
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        if not argv:
            raise ValueError(f"container {container['name']} has no command "
                             "(the image entrypoint cannot run locally)")
        argv = [sys.executable if arg in ("python", "python3") else arg for arg in argv]
        os.makedirs(workdir, exist_ok=True)
        self.exit_code = None
        self.process = subprocess.Popen(
            argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace", start_new_session=True)
        self.pids.append(self.process.pid)
        uid = self.pod_uid
        self.reader = threading.Thread(target=self._stream, args=(store, self.process, uid),
                                       name=f"log-{self.label}", daemon=True)
        self.reader.start()

    def _stream(self, store: ObjectStore, process: subprocess.Popen, uid: str) -> None:
        for line in process.stdout:
            line = line.rstrip("\n")
            self.tail.append(line)
            store.append_log(uid, line)

    def exited(self) -> bool:
        """Whether the current run has ended and its exit is not handled yet."""
        return self.exit_code is None and self.process is not None and self.process.poll() is not None

    def collect_exit(self) -> int:
        """Records the ended run's exit code (128 + n when killed by signal n), after its last line."""
        self.exit_code = exit_codes.container_exit_code(self.process.wait())
        if self.reader is not None:
            self.reader.join(timeout=10)  # every line is in the log before it closes
        return self.exit_code

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def kill_all(replicas: List[Replica], grace_seconds: float) -> None:
    """SIGTERM every live replica's process group, SIGKILL after the grace, reap all."""
    live = [r for r in replicas if r.running()]
    for r in live:
        _signal_group(r.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for r in live:
        try:
            r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(r.process.pid, signal.SIGKILL)
            r.process.wait()
    for r in replicas:
        if r.reader is not None and r.reader is not threading.current_thread():
            r.reader.join(timeout=5)


def main_container(pod: Dict[str, Any], kind: str = "TFJob") -> Dict[str, Any]:
    """The container the operator treats as the replica's (`tensorflow` in a TFJob, `pytorch`
    in a PyTorchJob), else the first."""
    containers = pod["spec"]["containers"]
    for container in containers:
        if container["name"] == MAIN_CONTAINER.get(kind):
            return container
    return containers[0]


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
