"""One pod on the node, from binding to removal, as the kubelet runs it.

Init containers run one after another, then every container at once; each exit is handled under
the pod's `restartPolicy` (restarts with the kubelet's doubling back-off, counted in
`restartCount`); the pod's status is posted after every change: phase, the PodScheduled,
PodReadyToStartContainers, Initialized, ContainersReady and Ready conditions, and each container's
state (`waiting` ContainerCreating / ErrImagePull / ImagePullBackOff / CrashLoopBackOff,
`running`, `terminated` with exitCode and reason Completed / Error / OOMKilled). A graceful
deletion stops the containers (SIGTERM, then SIGKILL after the grace period) and then removes the
pod from the API, as the kubelet finishes it.
"""

from __future__ import annotations

import copy
import logging
import shutil
import threading
import time
from typing import Any, Dict, List, Optional

from cluster.node_agent import podspec
from cluster.node_agent.container_state import MAX_BACKOFF_S, Container, now, rfc3339
from cluster.node_agent.kube import ApiError
from cluster.node_agent.pod_status import TERMINAL, PodStatus
from cluster.node_agent.volumes import VolumeSetUpError

log = logging.getLogger("node-agent")
#: How often running containers are inspected besides the exit events (a missed event).
RECHECK_S = 5.0
#: How often a deleted pod's final removal is sent again while the API still has it.
DELETE_RETRY_S = 2.0


class PodWorker(threading.Thread):
    """Runs one pod bound to this node (started by the agent, which feeds it the pod's updates
    and its containers' exits)."""

    def __init__(self, agent, pod: Dict[str, Any]):
        super().__init__(name=f"pod-{pod['metadata']['name']}", daemon=True)
        self.agent, self.pod = agent, pod
        meta = pod["metadata"]
        self.uid, self.namespace, self.pod_name = meta["uid"], meta["namespace"], meta["name"]
        self.path = f"/api/v1/namespaces/{self.namespace}/pods/{self.pod_name}"
        self.init = [Container(c) for c in pod["spec"].get("initContainers") or []]
        self.main = [Container(c) for c in pod["spec"]["containers"]]
        self.ip: Optional[str] = None
        self.phase = "Pending"
        self.initialized = not self.init
        self.volumes_ready = False
        self.start_time = now()
        self.status = PodStatus()
        self._wake = threading.Condition()
        self._exited: set = set()
        self.delete_grace: Optional[int] = None
        self.gone = False
        self.sources: Dict[str, str] = {}
        self.read_only: frozenset = frozenset()
        self._checked_at = time.monotonic()
        self.deletion_finished = False
        self._warned: set = set()

    # Fed by the agent ------------------------------------------------------------------------
    def update(self, pod: Dict[str, Any]) -> None:
        with self._wake:
            self.pod = pod
            if pod["metadata"].get("deletionTimestamp") and self.delete_grace is None:
                self.delete_grace = int(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
            self._wake.notify_all()

    def removed(self) -> None:
        with self._wake:
            self.gone = True
            self._wake.notify_all()

    def exited(self, podman_name: str) -> None:
        with self._wake:
            self._exited.add(podman_name)
            self._wake.notify_all()

    def owns(self, podman_name: str) -> bool:
        return any(podman_name == c.podman_name or podman_name in c.previous_names
                   for c in self.init + self.main)

    def log_target(self, container: str, previous: bool) -> Optional[str]:
        """The podman name of a container's current (or previous) run, for its logs."""
        for record in self.init + self.main:
            if record.name == container:
                return record.last_name if previous else record.podman_name
        return None

    # The pod's life --------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._live()
        except Exception:  # a defect of the agent: say so in its log, never hang the pod silently
            log.exception("pod %s/%s failed in the node agent", self.namespace, self.pod_name)
        finally:
            self._wait_gone()
            self._clean_up()

    def _live(self) -> None:
        self.ip = self.agent.allocate_ip(self.uid)
        self._post()
        if not self._make_volumes():
            return
        self.agent.names_changed()
        for record in self.init:
            if not self._run_until_done(record):
                return
        self.initialized = True
        for record in self.main:
            self._start(record)
        self._post()
        while True:
            if self._deleting():
                return self._finish_deletion()
            changed = self._reap(self.main)
            changed |= self._retry_due(self.main)
            if all(c.done for c in self.main):
                codes = [c.state["terminated"]["exitCode"] for c in self.main]
                self.phase = "Succeeded" if not any(codes) else "Failed"
                self._post()
                self.agent.release_ip(self.uid)
                self.agent.names_changed()
                return
            if changed:
                self._post()
            self._sleep(self.main)

    def _make_volumes(self) -> bool:
        while not self._deleting() and not self.gone:
            try:
                self.sources, self.read_only = self.agent.volumes.make(self.pod)
                self.volumes_ready = True
                return True
            except VolumeSetUpError as error:  # the kubelet waits, and says why in an event
                for record in self.init + self.main:
                    record.state = {"waiting": {"reason": "ContainerCreating"}}
                self._post()
                self._warn_once("FailedMount", str(error))
            except (podspec.PodSpecError, ApiError, OSError) as error:
                for record in self.main:
                    record.state = {"waiting": {"reason": "CreateContainerConfigError",
                                                "message": str(error)}}
                self._post()
                self._pause(2.0)
        if self._deleting():
            self._finish_deletion()
        return False

    def _warn_once(self, reason: str, message: str) -> None:
        """Posts a Warning event about the pod, as the kubelet records one (once per message)."""
        if (reason, message) in self._warned:
            return
        stamp = now()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{self.pod_name}.", "namespace": self.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": self.namespace,
                               "name": self.pod_name, "uid": self.uid,
                               "resourceVersion": self.pod["metadata"].get("resourceVersion")},
            "type": "Warning", "reason": reason, "message": message, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp,
            "source": {"component": "kubelet", "host": self.agent.node_name},
            "reportingComponent": "kubelet", "reportingInstance": self.agent.node_name}
        try:
            self.agent.kube.create(f"/api/v1/namespaces/{self.namespace}/events", event)
            self._warned.add((reason, message))
        except ApiError as error:  # an event is best effort, as the kubelet's are
            log.warning("event for pod %s/%s not recorded: %s", self.namespace, self.pod_name,
                        error)

    def _run_until_done(self, record: Container) -> bool:
        """Runs an init container until it succeeds (True) or the pod fails or goes (False)."""
        self._start(record)
        self._post()
        while True:
            if self._deleting():
                self._finish_deletion()
                return False
            changed = self._reap([record]) | self._retry_due([record])
            if record.done:
                if record.state["terminated"]["exitCode"] == 0:
                    return True
                self.phase = "Failed"
                self._post()
                self.agent.release_ip(self.uid)
                return False
            if changed:
                self._post()
            self._sleep([record])

    def _start(self, record: Container) -> None:
        image = record.spec["image"]
        if not self.agent.podman.image_exists(image):
            pulls = record.state.get("waiting", {}).get("reason") in ("ErrImagePull",
                                                                     "ImagePullBackOff")
            reason = "ImagePullBackOff" if pulls else "ErrImagePull"
            message = (f'Back-off pulling image "{image}"' if pulls else
                       f'failed to pull and unpack image "{image}": not found on this node '
                       "(the test bed's node pulls nothing: build it with containers/build.sh)")
            record.state = {"waiting": {"reason": reason, "message": message}}
            record.retry_at = time.monotonic() + (2.0 if not pulls else record.backoff_s)
            return
        pod = copy.deepcopy(self.pod)
        pod.setdefault("status", {})["podIP"] = self.ip
        try:
            env = {**self.agent.node_env(), **podspec.env_of(
                pod, record.spec, self.agent.node_ip, self.agent.lookup_in(self.namespace))}
            placement = podspec.Placement(
                bed_id=self.agent.bed_id, network=self.agent.podman.network, ip=self.ip,
                dns_server=self.agent.dns_address,
                dns_search=self.agent.search_domains(self.namespace),
                volume_sources=self.sources, read_only_volumes=self.read_only)
            argv = podspec.run_argv(pod, record.spec, env, placement, record.attempt)
        except (podspec.PodSpecError, ApiError) as error:
            record.state = {"waiting": {"reason": "CreateContainerConfigError",
                                        "message": str(error)}}
            record.retry_at = time.monotonic() + 2.0
            return
        name = podspec.container_name(pod, record.name, record.attempt)
        self.agent.podman.remove([name])
        result = self.agent.podman.run(*argv)
        record.podman_name = name
        inspected = self.agent.podman.inspect(name)
        if inspected:
            record.container_id = f"podman://{inspected['Id']}"
            self.agent.podman.remember(inspected["Id"])
        if result.returncode != 0 and not (inspected and inspected["State"]["Status"] in
                                           ("running", "exited", "stopped")):
            record.state = {"waiting": {"reason": "RunContainerError",
                                        "message": result.stderr.strip()[-500:]}}
            record.retry_at = time.monotonic() + record.backoff_s
            return
        started = (inspected or {}).get("State", {}).get("StartedAt", "")
        record.state = {"running": {"startedAt": rfc3339(started) or now()}}
        record.retry_at = None
        if result.returncode != 0 or (inspected and inspected["State"]["Status"] != "running"):
            self.exited(name)  # ended before its exit event could be matched

    def _reap(self, records: List[Container]) -> bool:
        """Records the containers that ended; decides each one's restart. True if any did."""
        with self._wake:
            ended = [r for r in records if r.podman_name in self._exited and r.running]
            self._exited.clear()  # a second notice of a container already handled is stale
        for record in ended:
            inspected = self.agent.podman.inspect(record.podman_name) or {}
            state = inspected.get("State", {})
            code = int(state.get("ExitCode", 137))
            reason = ("OOMKilled" if self.agent.podman.oom_killed(inspected) else
                      "Completed" if code == 0 else "Error")
            terminated = {"exitCode": code, "reason": reason,
                          "startedAt": record.state["running"]["startedAt"],
                          "finishedAt": rfc3339(state.get("FinishedAt", "")) or now(),
                          "containerID": record.container_id}
            policy = self.pod["spec"].get("restartPolicy")
            if record in self.init:  # init containers restart on failure unless policy is Never
                restart = code != 0 and policy != "Never"
            else:
                restart = podspec.restart_wanted(policy, code)
            if restart and self.delete_grace is None:
                record.last_state = {"terminated": terminated}
                record.last_name = record.podman_name
                record.state = {"waiting": {"reason": "CrashLoopBackOff", "message": (
                    f"back-off {record.backoff_s:.0f}s restarting failed container="
                    f"{record.name} pod={self.pod_name}_{self.namespace}({self.uid})")}}
                record.retry_at = time.monotonic() + (record.backoff_s if record.restart_count
                                                      else 0.0)
            else:
                record.state = {"terminated": terminated}
                record.done = True
        return bool(ended)

    def _retry_due(self, records: List[Container]) -> bool:
        due = [r for r in records if r.retry_at is not None and r.retry_at <= time.monotonic()
               and not r.done and self.delete_grace is None]
        for record in due:
            if "CrashLoopBackOff" == record.state.get("waiting", {}).get("reason"):
                record.previous_names.append(record.podman_name)
                record.attempt += 1
                if record.restart_count:
                    record.backoff_s = min(record.backoff_s * 2, MAX_BACKOFF_S)
                record.restart_count += 1
            self._start(record)
        return bool(due)

    def _sleep(self, records: List[Container]) -> None:
        due = [r.retry_at for r in records if r.retry_at is not None]
        wait = min([1.0] + [max(0.0, t - time.monotonic()) for t in due])
        self._pause(wait)
        if time.monotonic() - self._checked_at > RECHECK_S:  # in case an exit event was missed
            self._checked_at = time.monotonic()
            for record in records:
                if record.running and (self.agent.podman.inspect(record.podman_name) or {}).get(
                        "State", {}).get("Status") != "running":
                    self.exited(record.podman_name)

    def _pause(self, seconds: float) -> None:
        with self._wake:
            if not self._exited and not self.gone and not self._deleting():
                self._wake.wait(seconds)

    def _deleting(self) -> bool:
        return self.delete_grace is not None or self.gone

    def _finish_deletion(self) -> None:
        """Stops the containers within the grace period, posts the end, removes the pod."""
        records = self.init + self.main
        running = [r.podman_name for r in records if r.running and r.podman_name]
        self.agent.podman.stop(running, self.delete_grace or 0)
        with self._wake:
            self._exited.update(running)
        self._reap(records)
        for record in records:
            if "terminated" not in record.state and (record in self.main or record.podman_name):
                # As the kubelet ends a container that never ran (or was between runs).
                record.state = {"terminated": {
                    "exitCode": 137, "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was terminated"}}
            record.done = True
        if self.phase not in TERMINAL and not self.gone:
            codes = [c.state["terminated"]["exitCode"] for c in self.main]
            self.phase = "Succeeded" if self.initialized and not any(codes) else "Failed"
            self._post()
        self.agent.release_ip(self.uid)
        self.agent.names_changed()
        self.deletion_finished = True
        self._remove_from_api()

    def _remove_from_api(self) -> None:
        """The final deletion (grace 0, this pod's uid), as the kubelet's status manager sends
        it once a deleted pod's containers have stopped."""
        if self.gone:
            return
        try:
            self.agent.kube.delete(self.path, {"gracePeriodSeconds": 0,
                                               "preconditions": {"uid": self.uid}})
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("deleting pod %s: %s", self.pod_name, error)

    def _wait_gone(self) -> None:
        """Waits for the pod to leave the API, finishing a deletion requested meanwhile."""
        while not self.gone:
            with self._wake:
                self._wake.wait(DELETE_RETRY_S if self.deletion_finished else 1.0)
            if self.gone or self.delete_grace is None:
                continue
            try:
                if self.deletion_finished:
                    self._remove_from_api()  # the pod is still there: send it again
                else:
                    self._finish_deletion()
            except Exception:  # keep trying: a pod must never stay Terminating
                log.exception("finishing the deletion of pod %s/%s", self.namespace,
                              self.pod_name)

    def _clean_up(self) -> None:
        names = [n for r in self.init + self.main for n in [r.podman_name, *r.previous_names] if n]
        self.agent.podman.remove(names)
        self.agent.release_ip(self.uid)
        self.agent.forget(self.uid)
        shutil.rmtree(self.agent.volumes.pod_directory(self.pod), ignore_errors=True)

    def _post(self) -> None:
        """Posts the pod's whole status (the phase becomes Running once a container ran)."""
        if self.phase not in TERMINAL and self.initialized and any(
                c.running or c.restart_count or "terminated" in c.state for c in self.main):
            self.phase = "Running"
        status = self.status.compose(
            self.phase, self.init, self.main, self.volumes_ready, self.initialized, self.ip,
            self.agent.node_ip, self.start_time,
            (self.pod.get("status") or {}).get("conditions") or [])
        try:
            self.agent.kube.merge_patch(self.path + "/status", {"status": status})
        except ApiError as error:
            if error.status != 404:
                log.warning("status of pod %s/%s: %s", self.namespace, self.pod_name, error)
        except Exception:  # a timeout: the next change posts the whole status again
            log.exception("status of pod %s/%s", self.namespace, self.pod_name)
