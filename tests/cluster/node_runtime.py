"""The test bed's node: the node agent as a process, and what `stop` removes after it (the pods'
podman containers and network, found by the bed's label)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List

from cluster import processes
from cluster.operators import HOST_SERVICES
from cluster.node_agent.__main__ import NODE_NAME
from cluster.node_agent.podspec import BED_LABEL
from cluster.node_agent.runtime import CONTAINERS_FILE, network_name

HERE = Path(__file__).resolve().parent


def bed_id(root: Path) -> str:
    """The id that labels a bed's containers and names its network (from its directory)."""
    return hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:10]


def start_node_agent(bed, procs: processes.Processes) -> None:
    """Starts the node agent and waits until its Node is Ready."""
    port = processes.free_port()
    procs.start("node-agent", [sys.executable, "-m", "cluster.node_agent", "--root",
                               str(bed.root), "--kubeconfig", str(bed.kubeconfig), "--port",
                               str(port), "--bed-id", bed_id(bed.root),
                               *[f"--host-service={namespace}/{name}"
                                 for namespace, name in HOST_SERVICES]],
                # In the bed's directory: what podman's container monitor writes in its working
                # directory (an `oom` marker) stays there.
                env={**os.environ, "PYTHONPATH": str(HERE.parent)}, cwd=bed.root)

    def ready() -> bool:
        found = bed.kubectl_run("get", "node", NODE_NAME, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    procs.wait_until("node-agent", ready, 60)


def remove_all(root: Path) -> List[str]:
    """Removes every container and the network of the bed in `root`; returns the containers."""
    podman = shutil.which("podman")
    if not podman:
        return []
    label = f"label={BED_LABEL}={bed_id(root)}"
    names = subprocess.run([podman, "ps", "-a", "--filter", label, "--format", "{{.Names}}"],
                           capture_output=True, text=True, timeout=120).stdout.split()
    if names:
        subprocess.run([podman, "rm", "--force", "--time", "0", "--ignore", *names],
                       capture_output=True, timeout=300)
    subprocess.run([podman, "network", "rm", "--force", network_name(bed_id(root))],
                   capture_output=True, timeout=120)
    _wait_gone(kill_container_processes(Path(root) / CONTAINERS_FILE))
    return names


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, exited and waiting to be reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pids: List[int], seconds: float = 10.0) -> None:
    """Returns once every one of `pids` has ended (SIGKILL is not instant), or after `seconds`."""
    deadline = time.monotonic() + seconds
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        time.sleep(0.05)


def kill_container_processes(record: Path) -> List[int]:
    """SIGKILLs every process still in the cgroup of a container the agent created, and its
    conmon: podman interrupted mid-stop (the agent killed by `stop`) can forget a container
    whose processes keep running. Returns their pids."""
    try:
        ids = set(record.read_text().split())
    except OSError:
        return []
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                cgroup = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        in_container = any(f"libpod-{i}" in cgroup for i in ids)
        conmon = argv[0].endswith(b"conmon") and any(i.encode() in argv for i in ids)
        if (in_container or conmon) and _alive(int(entry)):
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
            except ProcessLookupError:
                pass
    return killed
