"""The node's container runtime: podman, for the containers of one test bed (all labelled with
the bed's id), with one `podman events` stream telling which container ended."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

from cluster.node_agent.podspec import BED_LABEL


#: The file in the bed's directory listing every container the agent created (one id a line).
CONTAINERS_FILE = "containers.txt"


def network_name(bed_id: str) -> str:
    """The podman network of a bed's pods."""
    return f"kfdist-bed-{bed_id}"


class Podman:
    """podman for one test bed.

    Args:
      binary: The podman binary.
      bed_id: The test bed's id (the value of every container's `BED_LABEL`).
      record: Where each created container's id is appended (`CONTAINERS_FILE`).
    """

    def __init__(self, binary: str, bed_id: str, record: Optional[Path] = None):
        self.binary, self.bed_id = binary, bed_id
        self.network = network_name(bed_id)
        self.record = record
        self._events: Optional[subprocess.Popen] = None
        self._closed = False

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=timeout)

    def create_network(self) -> Dict[str, str]:
        """Creates the pods' network (once) and returns its `subnet` and `gateway`."""
        if self.run("network", "exists", self.network).returncode != 0:
            made = self.run("network", "create", "--label", f"{BED_LABEL}={self.bed_id}",
                            self.network)
            if made.returncode != 0:
                raise RuntimeError(f"podman network create failed: {made.stderr.strip()}")
        inspected = json.loads(self.run("network", "inspect", self.network).stdout)[0]
        subnet = inspected["subnets"][0]
        return {"subnet": subnet["subnet"], "gateway": subnet["gateway"]}

    def image_exists(self, image: str) -> bool:
        return self.run("image", "exists", image).returncode == 0

    def inspect(self, name: str) -> Optional[Dict]:
        """The container's inspection, or None when podman does not know it."""
        result = self.run("container", "inspect", name)
        if result.returncode != 0:
            return None
        return json.loads(result.stdout)[0]

    def oom_killed(self, inspected: Dict) -> bool:
        """Whether the kernel's OOM killer ended the container: podman says so where its monitor
        sees the cgroup's OOM event, else the kernel log names the container's memory cgroup
        (`oom-kill:... task_memcg=.../libpod-<id>`), which is what the kubelet's OOM watcher
        reads too."""
        state = inspected.get("State", {})
        if state.get("OOMKilled"):
            return True
        if int(state.get("ExitCode", 0)) != 137 or not inspected.get("Id"):
            return False
        kernel_log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30)
        return any("oom-kill:" in line and f"libpod-{inspected['Id']}" in line
                   for line in kernel_log.stdout.splitlines())

    def remember(self, container_id: str) -> None:
        """Appends a created container's id to the record (`bed.stop` sweeps what it lists)."""
        if self.record:
            with open(self.record, "a") as f:
                f.write(container_id + "\n")

    def stop(self, names: Sequence[str], grace_s: int) -> None:
        if names:
            self.run("stop", "--ignore", "--time", str(max(0, grace_s)), *names,
                     timeout=grace_s + 60)

    def remove(self, names: Sequence[str]) -> None:
        if names:
            self.run("rm", "--force", "--ignore", "--time", "0", *names, timeout=120)

    def watch_exits(self, on_exit: Callable[[str], None]) -> None:
        """Calls `on_exit(container name)` from a thread each time one of the bed's containers
        ends (until `close`)."""
        def read() -> None:
            while not self._closed:  # podman events ending (it should not) is restarted
                self._events = subprocess.Popen(
                    [self.binary, "events", "--format", "json", "--filter", "event=died",
                     "--filter", f"label={BED_LABEL}={self.bed_id}"],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                for line in self._events.stdout:
                    try:
                        event = json.loads(line)
                        name = event.get("Name") or event.get("Actor", {}).get(
                            "Attributes", {}).get("name")
                        if name:
                            on_exit(name)
                    except Exception:  # noqa: BLE001 -- one bad event must not end the stream
                        continue
                self._events.wait()

        threading.Thread(target=read, name="podman-events", daemon=True).start()

    def close(self) -> None:
        """Ends the exit events' stream."""
        self._closed = True
        if self._events and self._events.poll() is None:
            self._events.terminate()
            try:
                self._events.wait(5)
            except subprocess.TimeoutExpired:
                self._events.kill()
