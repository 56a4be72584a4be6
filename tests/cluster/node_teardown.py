"""What the genuine node (`node.py`) leaves on the host, and its removal once the kubelet has
stopped: its pods (through containerd's CRI), containerd's shims, mounts under the bed, the
bridge, kube-proxy's and the kubelet's iptables chains, the kubelet's log links and CNI's cached
results.

    stop_pods(root); clean(root)             # from any process (down.sh), after the kubelet
    leftovers(root, layout)                  # what is still there: {} once all is gone
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List

from cluster import node, node_config, processes

#: Where the kubelet links each container's log (fixed in its code).
CONTAINER_LOG_LINKS = Path("/var/log/containers")
#: Where libcni caches each attachment's result (its default; containerd sets no other).
CNI_CACHE = Path("/var/lib/cni/results")
#: Where containerd's shims put their sockets (fixed in its code), innermost first.
SHIM_DIRS = (Path("/run/containerd/s"), Path("/run/containerd"))


def stop_pods(root: Path) -> None:
    """Stops and removes every pod sandbox and container on the node (their network namespaces
    and addresses released by CNI), through containerd's CRI; run after the kubelet has stopped
    and before containerd does. A containerd that is no longer running is started for it."""
    record = node.record(root)
    if record is None:
        return
    layout = node_config.NodeLayout.from_json(record["layout"])
    if not layout.config("containerd.toml").exists():
        return
    temporary = None
    if not node.socket_answers(layout.containerd_socket):
        temporary = subprocess.Popen(
            [record["containerd"], "--config", str(layout.config("containerd.toml"))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PATH": f"{layout.root / 'bin'}:{os.environ['PATH']}"})
        deadline = time.monotonic() + 30
        while not node.socket_answers(layout.containerd_socket) and time.monotonic() < deadline:
            time.sleep(0.1)
    endpoint = f"unix://{layout.containerd_socket}"
    try:
        for argv in (["rmp", "--all", "--force"], ["rm", "--all", "--force"]):
            subprocess.run([record["crictl"], "--runtime-endpoint", endpoint,
                            "--image-endpoint", endpoint, "--timeout", "60s", *argv],
                           capture_output=True, timeout=180)
    finally:
        if temporary is not None:
            temporary.terminate()
            try:
                temporary.wait(timeout=20)
            except subprocess.TimeoutExpired:
                temporary.kill()
                temporary.wait()


def _mounts_under(root: Path) -> List[str]:
    prefix = str(Path(root).resolve()) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return sorted({p for p in points if p.startswith(prefix)}, key=len, reverse=True)


def _shim_pids(socket_path: Path) -> List[int]:
    return processes.pids_whose_argv(lambda argv: argv[0].endswith(b"containerd-shim-runc-v2")
                                     and str(socket_path).encode() in argv)


def clean(root: Path) -> Dict[str, list]:
    """Removes what the node leaves on the host once its processes have ended: shims still
    running, mounts under the bed's directory, the bridge, kube-proxy's iptables rules, the
    kubelet's log links and CNI's cached results. Returns what it found, by kind."""
    record = node.record(root)
    if record is None:
        return {}
    layout = node_config.NodeLayout.from_json(record["layout"])
    found: Dict[str, list] = {"shims": _shim_pids(layout.containerd_socket)}
    for pid in found["shims"]:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    found["mounts"] = _mounts_under(Path(root))
    for point in found["mounts"]:
        subprocess.run(["umount", "--lazy", point], capture_output=True)
    gone = subprocess.run(["ip", "link", "del", layout.bridge], capture_output=True)
    found["bridge"] = [layout.bridge] if gone.returncode == 0 else []
    subprocess.run([record["kube-proxy"], "--cleanup"], capture_output=True, timeout=120)
    found["chains"] = remove_kube_chains()
    found["log links"] = []
    if CONTAINER_LOG_LINKS.is_dir():
        for link in CONTAINER_LOG_LINKS.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(str(layout.pod_logs)):
                link.unlink()
                found["log links"].append(link.name)
    if CNI_CACHE.is_dir():
        for cached in CNI_CACHE.glob(f"{node_config.CNI_NETWORK}-*"):
            cached.unlink()
    for directory in SHIM_DIRS:  # the shims' sockets' (fixed in containerd), once empty
        try:
            directory.rmdir()
        except OSError:
            pass
    return found


def _kube_chains(tool: str) -> List[tuple]:
    """(table, chain) of every KUBE-* chain, and (table, rule) of every rule jumping to one
    from a chain of another name, in `tool`'s (iptables or ip6tables) rules."""
    chains, jumps, table = [], [], None
    saved = subprocess.run([f"{tool}-save"], capture_output=True, text=True).stdout
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":KUBE-"):
            chains.append((table, line[1:].split()[0]))
        elif line.startswith("-A ") and " -j KUBE-" in line and not line.split()[1].startswith(
                "KUBE-"):
            jumps.append((table, line))
    return [("chain", *c) for c in chains] + [("jump", *j) for j in jumps]


def remove_kube_chains() -> List[str]:
    """Removes every KUBE-* chain (kube-proxy's and the kubelet's) and the rules that jump to
    them, in IPv4 and IPv6: one genuine node runs on a machine at a time, and nothing else
    here makes such chains. Returns what it removed."""
    removed = []
    for tool in ("iptables", "ip6tables"):
        found = _kube_chains(tool)
        for _, table, rule in (f for f in found if f[0] == "jump"):
            subprocess.run([tool, "-t", table, "-D", *shlex.split(rule)[1:]], capture_output=True)
            removed.append(f"{tool} -t {table} {rule}")
        for verb in ("-F", "-X"):
            for _, table, chain in (f for f in found if f[0] == "chain"):
                subprocess.run([tool, "-t", table, verb, chain], capture_output=True)
        removed += [f"{tool} -t {table} {chain}" for kind, table, chain in found
                    if kind == "chain"]
    return removed


def leftovers(root: Path, layout: node_config.NodeLayout) -> Dict[str, list]:
    """What of the node in `root` is still on the host after `stop` (nothing, by kind, when
    empty): shims, mounts under the bed, its bridge, kube-proxy's chains, log links."""
    found = {"shims": _shim_pids(layout.containerd_socket),
             "mounts": _mounts_under(Path(root)),
             "bridge": [layout.bridge] if Path(f"/sys/class/net/{layout.bridge}").exists()
             else [],
             "iptables chains": [f"{tool} {entry}" for tool in ("iptables", "ip6tables")
                                 for entry in _kube_chains(tool)],
             "log links": [link.name for link in (CONTAINER_LOG_LINKS.iterdir()
                                                  if CONTAINER_LOG_LINKS.is_dir() else ())
                           if link.is_symlink()
                           and os.readlink(link).startswith(str(layout.pod_logs))]}
    return {kind: items for kind, items in found.items() if items}
