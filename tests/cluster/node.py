"""The genuine node: containerd (with Debian's runc), the kubelet, kube-proxy and CNI's bridge on
this machine, CoreDNS and local-path-provisioner as pods in the cluster, each with credentials of
its own.

    layout = plan(root)                      # before the API server: it listens on the node's
    create_bridge(layout)                    # address, the bridge's
    start(bed, procs, layout, binaries)      # returns once the Node is Ready and DNS answers

The configuration files are `node_config.py`'s; the images no registry gives are
`node_images.py`'s; what `stop` removes after the node, `node_teardown.py`'s.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from cluster import (api_reads, certs, control_plane, node_addons, node_config, node_images,
                     processes)

NODE_DIR = "node"
NODE_RECORD = "node.json"
RUNC = "/usr/sbin/runc"
#: The subnets a node's pods may take: the first /24 here that no interface or route uses.
SUBNET_POOL = ipaddress.ip_network("10.240.0.0/16")
READY_TIMEOUT_S = 180.0
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")


def cache_dir() -> Path:
    """The bed's build cache (as `build.sh` finds it)."""
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("KFDIST_CLUSTER_CACHE") or Path(xdg) / "kfdist" / "cluster")


def _used_networks() -> List[ipaddress.IPv4Network]:
    routes = subprocess.run(["ip", "-4", "-o", "route", "show", "table", "all"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    found = []
    for line in routes:
        word = line.split()[0] if line.split() else ""
        if word in ("local", "broadcast") and len(line.split()) > 1:
            word = line.split()[1]
        try:
            found.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    return found


def plan(root: Path) -> node_config.NodeLayout:
    """The node's layout in bed directory `root`: a /24 no interface uses, free ports."""
    used = _used_networks()
    subnet = next((net for net in SUBNET_POOL.subnets(new_prefix=24)
                   if not any(net.overlaps(other) for other in used)), None)
    if subnet is None:
        raise processes.StartFailed(f"no free /24 left in {SUBNET_POOL} for the node's pods")
    bridge = "kfd" + hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:10]
    return node_config.NodeLayout(
        root=Path(root).resolve() / NODE_DIR, subnet=str(subnet), bridge=bridge,
        kubelet_port=processes.free_port(),
        healthz_ports=(processes.free_port(), processes.free_port(), processes.free_port()),
        containerd_root=cache_dir() / "containerd-root")


def create_bridge(layout: node_config.NodeLayout) -> None:
    """The pods' bridge, with the node's address (the API server listens there for the pods)."""
    prefix = ipaddress.ip_network(layout.subnet).prefixlen
    for argv in (["ip", "link", "add", "name", layout.bridge, "type", "bridge"],
                 ["ip", "addr", "add", f"{layout.node_ip}/{prefix}", "dev", layout.bridge],
                 ["ip", "link", "set", layout.bridge, "up"]):
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise processes.StartFailed(f"{' '.join(argv)}: {result.stderr.strip()}")


def certificates(authority: certs.Authority, layout: node_config.NodeLayout) -> None:
    """The node's identities: the kubelet's client and serving certificates, kube-proxy's and
    kube-scheduler's (the users the API server's bootstrap RBAC already knows)."""
    authority.issue("kubelet", f"system:node:{node_config.NODE_NAME}", organization="system:nodes")
    authority.issue("kubelet-serving", f"system:node:{node_config.NODE_NAME}",
                    hosts=(layout.node_ip, node_config.NODE_NAME))
    authority.issue("kube-proxy", "system:kube-proxy")
    authority.issue("kube-scheduler", "system:kube-scheduler")


def write_kubeconfig(bed, name: str, stem: str, user: str) -> Path:
    """A kubeconfig for component `name` with the client certificate `pki/STEM.crt`."""
    path = bed.layout.component_kubeconfig(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    pki = bed.layout.pki
    path.write_text(control_plane.kubeconfig(
        bed.layout.api_url, pki / "ca.crt",
        control_plane.client_certificate(pki / f"{stem}.crt", pki / f"{stem}.key"), user))
    return path


def scheduler_argv(binary: str, kubeconfig: Path) -> List[str]:
    """kube-scheduler with its own identity; serving nothing (no port on the host)."""
    return [binary, f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--leader-elect=false",
            "--bind-address=127.0.0.1", "--secure-port=0", f"-v={control_plane.VERBOSITY}"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _link_binaries(layout: node_config.NodeLayout, binaries: Dict[str, str]) -> Path:
    """containerd finds its shim on its PATH, and CNI its plugins in one directory."""
    bin_dir = layout.root / "bin"
    for directory, names in ((bin_dir, ("containerd-shim-runc-v2",)),
                             (layout.cni_bin_dir, CNI_PLUGINS)):
        directory.mkdir(parents=True, exist_ok=True)
        for name in names:
            link = directory / name
            link.unlink(missing_ok=True)
            link.symlink_to(binaries[name])
    return bin_dir


def socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(1)
        return sock.connect_ex(str(path)) == 0


def start_containerd(procs: processes.Processes, layout: node_config.NodeLayout,
                     binaries: Dict[str, str], sandbox_image: str) -> None:
    """containerd with the node's configuration; returns once its socket answers."""
    bin_dir = _link_binaries(layout, binaries)
    layout.containerd_root.mkdir(parents=True, exist_ok=True)
    config = _write(layout.config("containerd.toml"),
                    node_config.containerd_config(layout, RUNC, sandbox_image))
    procs.start("containerd", [binaries["containerd"], "--config", str(config)],
                env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    procs.wait_until("containerd", lambda: socket_answers(layout.containerd_socket),
                     READY_TIMEOUT_S)


def _node_ready(bed) -> bool:
    try:
        found = api_reads.get(bed.layout, "node", None, node_config.NODE_NAME)
    except api_reads.NotFound:
        return False
    conditions = found["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _deployments_ready(bed) -> bool:
    for namespace, name in (("kube-system", "coredns"),
                            (node_addons.PROVISIONER_NAMESPACE, "local-path-provisioner")):
        try:
            found = api_reads.get(bed.layout, "deployment", namespace, name)
        except api_reads.NotFound:
            return False
        if not found["status"].get("readyReplicas"):
            return False
    return True


def start(bed, procs: processes.Processes, layout: node_config.NodeLayout,
          binaries: Dict[str, str], extra_images=()) -> None:
    """Starts containerd, the kubelet and kube-proxy, then CoreDNS and the provisioner as pods;
    returns once the Node is Ready and both Deployments are.

    Args:
      bed: The bed (its API server runs, listening on `layout.node_ip`).
      procs: The bed's processes.
      layout: The node's layout (`plan`), its bridge made (`create_bridge`).
      binaries: {name: path} of the bed's binaries.
      extra_images: podman images the pods run (kfdist's), imported into containerd too.
    """
    pki = bed.layout.pki
    (bed.root / NODE_RECORD).write_text(json.dumps({
        "layout": layout.to_json(), "crictl": binaries["crictl"],
        "kube-proxy": binaries["kube-proxy"], "containerd": binaries["containerd"]}, indent=1))
    kube_version = Path(binaries["kubelet"]).parent.name.split("-")[0]
    images = node_images.build_images(binaries, cache_dir(), kube_version)
    for directory in (layout.cni_conf_dir, layout.cni_ipam_dir, layout.kubelet_dir,
                      layout.pod_logs, layout.volumes):
        directory.mkdir(parents=True, exist_ok=True)
    (layout.cni_conf_dir / f"10-{node_config.CNI_NETWORK}.conflist").write_text(
        json.dumps(node_config.cni_conflist(layout), indent=1))
    _write(layout.resolv_conf, node_config.resolv_conf())

    start_containerd(procs, layout, binaries, images["pause"])
    node_images.import_images(binaries["ctr"], layout.containerd_socket, layout.containerd_root,
                              [*images.values(), *extra_images])

    kubelet_config = _write(layout.config("kubelet.yaml"),
                            json.dumps(node_config.kubelet_config(layout, pki), indent=1))
    kubeconfig = write_kubeconfig(bed, "kubelet", "kubelet",
                                  f"system:node:{node_config.NODE_NAME}")
    procs.start("kubelet", [binaries["kubelet"], f"--config={kubelet_config}",
                            f"--kubeconfig={kubeconfig}",
                            f"--hostname-override={node_config.NODE_NAME}",
                            f"--node-ip={layout.node_ip}", f"--root-dir={layout.kubelet_dir}",
                            f"--cert-dir={layout.root / 'kubelet-pki'}"])
    procs.wait_until("kubelet", lambda: _node_ready(bed), READY_TIMEOUT_S)

    proxy_kubeconfig = write_kubeconfig(bed, "kube-proxy", "kube-proxy", "system:kube-proxy")
    proxy_config = _write(layout.config("kube-proxy.yaml"), json.dumps(
        node_config.kube_proxy_config(layout, proxy_kubeconfig), indent=1))
    procs.start("kube-proxy", [binaries["kube-proxy"], f"--config={proxy_config}"])

    objects = (node_addons.coredns_objects(images["coredns"])
               + node_addons.provisioner_objects(images["local-path-provisioner"],
                                                 images["busybox"], layout.volumes))
    bed.kubectl_run("apply", "--server-side", "-f", "-",
                    stdin=yaml.safe_dump_all(objects, sort_keys=False))
    procs.wait_until("kubelet", lambda: _deployments_ready(bed), READY_TIMEOUT_S)


def record(root: Path) -> Optional[dict]:
    """What the node in `root` recorded at its start (its layout, its binaries), or None."""
    try:
        return json.loads((Path(root) / NODE_RECORD).read_text())
    except (OSError, ValueError):
        return None


def layout_of(root: Path) -> node_config.NodeLayout:
    """The layout of the genuine node of the bed in `root`, as it recorded it."""
    return node_config.NodeLayout.from_json(record(root)["layout"])


def import_images(bed, references) -> list:
    """Imports podman's images `references` into the running node's containerd (those not
    imported already); returns the references imported now."""
    layout = layout_of(bed.root)
    # pytest's workers share the node: one imports at a time (the record of what is imported).
    with processes.locked(layout.containerd_root / node_images.IMPORTED):
        return node_images.import_images(bed.binaries["ctr"], layout.containerd_socket,
                                         layout.containerd_root, references)


def kill_container(bed, container_id: str) -> None:
    """SIGKILLs a container of the node's pods (`containerd://<id>`, as a pod's status names it)
    as a crash ends it: no signal handler of its process runs, and the kubelet sees it exit."""
    layout = layout_of(bed.root)
    subprocess.run([bed.binaries["ctr"], "--address", str(layout.containerd_socket), "-n",
                    "k8s.io", "tasks", "kill", "--signal", "SIGKILL",
                    container_id.removeprefix("containerd://")],
                   check=True, capture_output=True, timeout=30)
