"""The genuine node's configuration files and kube-system objects, as pure functions of its layout.

What starts the node from these is `node.py`. Each file is what a kubeadm or kind node carries,
changed only where this machine forces it:

* containerd's CRI runs runc with cgroupfs and `restrict_oom_score_adj` (the VM forbids lowering
  `oom_score_adj`: without it runc fails every sandbox), keeps the pods' network namespaces under
  its own state directory, and takes its sandbox image from the bed (nothing can be pulled);
* the kubelet runs on cgroup v1 (`failCgroupV1: false`, `cgroupDriver: cgroupfs`,
  `cgroupsPerQOS: false`), never garbage-collects images (none can be pulled again) and evicts
  only when the disk is all but full;

The objects the node's own pods are made of (CoreDNS, the provisioner) are `node_addons.py`'s.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from pathlib import Path
from typing import Dict

#: The node's name (the Node object, the kubelet's client certificate's `system:node:` user).
NODE_NAME = "kfdist-test-node"
#: The Services' range (the API server's `--service-cluster-ip-range`), the `kubernetes`
#: Service's address in it, and the cluster DNS's.
SERVICE_RANGE = "10.96.0.0/24"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DNS_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
#: The CNI network's name (the bridge plugin's, and the file containerd reads).
CNI_NETWORK = "kfdist-bed"
#: Image names the bed gives the images it builds (no registry serves them).
IMAGE_PREFIX = "localhost/kfdist-bed"


@dataclasses.dataclass(frozen=True)
class NodeLayout:
    """Where the node keeps its files, and its addresses and ports.

    Attributes:
      root: The node's directory (`DIR/node`).
      subnet: The pods' subnet (a /24); its first address is the bridge's, the node's own
        (its InternalIP, where the API server and the kubelet listen for the pods).
      bridge: The pods' Linux bridge.
      kubelet_port: The kubelet's HTTPS port (logs, exec), on the node's address.
      healthz_ports: On 127.0.0.1: the kubelet's health port, kube-proxy's health and metrics
        ports.
      containerd_root: containerd's content, images and snapshots: kept between beds (in the
        build cache), so an image is imported once.
    """

    root: Path
    subnet: str
    bridge: str
    kubelet_port: int
    healthz_ports: tuple
    containerd_root: Path

    @property
    def node_ip(self) -> str:
        return str(next(ipaddress.ip_network(self.subnet).hosts()))

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_bin_dir(self) -> Path:
        return self.root / "cni" / "bin"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def volumes(self) -> Path:
        """The provisioner's directory: a claim is `volumes/<namespace>/<claim>`."""
        return self.root.parent / "volumes"

    @property
    def resolv_conf(self) -> Path:
        return self.root / "resolv.conf"

    def config(self, name: str) -> Path:
        return self.root / "configs" / name

    def to_json(self) -> Dict:
        return {"root": str(self.root), "subnet": self.subnet, "bridge": self.bridge,
                "kubelet_port": self.kubelet_port, "healthz_ports": list(self.healthz_ports),
                "containerd_root": str(self.containerd_root)}

    @classmethod
    def from_json(cls, data: Dict) -> "NodeLayout":
        return cls(Path(data["root"]), data["subnet"], data["bridge"], data["kubelet_port"],
                   tuple(data["healthz_ports"]), Path(data["containerd_root"]))


def image(name: str, version: str) -> str:
    """The reference of an image the bed builds (`IMAGE_PREFIX/NAME:VERSION`)."""
    return f"{IMAGE_PREFIX}/{name}:{version}"


def containerd_config(layout: NodeLayout, runc: str, sandbox_image: str) -> str:
    """containerd's configuration (version 4, containerd 2.4's): CRI on runc with cgroupfs, CNI from the node's
    directories, the bed's sandbox image."""
    cri_runtime = "plugins.'io.containerd.cri.v1.runtime'"
    return "\n".join([
        "version = 4",
        f"root = {json.dumps(str(layout.containerd_root))}",
        f"state = {json.dumps(str(layout.containerd_state))}",
        # Nothing read or made at fixed paths: no drop-in directory, no NRI socket under
        # /var/run/nri, no /opt/containerd.
        "imports = []",
        "disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.internal.v1.opt']",
        "[debug]",
        "  level = 'warn'",
        "[plugins.'io.containerd.server.v1.grpc']",
        f"  address = {json.dumps(str(layout.containerd_socket))}",
        "[plugins.'io.containerd.server.v1.ttrpc']",
        f"  address = {json.dumps(str(layout.containerd_socket) + '.ttrpc')}",
        "[plugins.'io.containerd.server.v1.debug']",
        "  address = ''",
        "[plugins.'io.containerd.server.v1.metrics']",
        "  address = ''",
        "[plugins.'io.containerd.cri.v1.images']",
        "  snapshotter = 'overlayfs'",
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
        f"  sandbox = {json.dumps(sandbox_image)}",
        f"[{cri_runtime}]",
        # The VM forbids lowering oom_score_adj: without this runc fails every sandbox
        # ("can't get final child's PID from pipe").
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        "  enable_unprivileged_ports = true",
        f"[{cri_runtime}.containerd]",
        "  default_runtime_name = 'runc'",
        f"[{cri_runtime}.containerd.runtimes.runc]",
        "  runtime_type = 'io.containerd.runc.v2'",
        f"[{cri_runtime}.containerd.runtimes.runc.options]",
        f"  BinaryName = {json.dumps(runc)}",
        f"  Root = {json.dumps(str(layout.containerd_state / 'runc'))}",
        "  SystemdCgroup = false",
        f"[{cri_runtime}.cni]",
        f"  bin_dirs = [{json.dumps(str(layout.cni_bin_dir))}]",
        f"  conf_dir = {json.dumps(str(layout.cni_conf_dir))}",
        "  max_conf_num = 1",
        "[plugins.'io.containerd.grpc.v1.cri']",
        "  stream_server_address = '127.0.0.1'",
        "  stream_server_port = '0'",
        ""])


def cni_conflist(layout: NodeLayout) -> Dict:
    """The pods' network: a bridge (the node's address its gateway), addresses from host-local,
    hairpin so a pod reaches itself through a Service, and portmap for hostPorts."""
    return {"cniVersion": "1.0.0", "name": CNI_NETWORK, "plugins": [
        {"type": "bridge", "bridge": layout.bridge, "isGateway": True, "ipMasq": True,
         "hairpinMode": True,
         "ipam": {"type": "host-local", "dataDir": str(layout.cni_ipam_dir),
                  "ranges": [[{"subnet": layout.subnet, "gateway": layout.node_ip}]],
                  "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}


def kubelet_config(layout: NodeLayout, pki: Path) -> Dict:
    """The kubelet's KubeletConfiguration."""
    kubelet_healthz = layout.healthz_ports[0]
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        # cgroup v1 (hybrid) on this kernel: kubelet 1.35+ refuses it unless told.
        "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [], "failSwapOn": False,
        "address": layout.node_ip, "port": layout.kubelet_port, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": kubelet_healthz,
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [CLUSTER_DNS_IP], "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(layout.resolv_conf),
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "podLogsDir": str(layout.pod_logs),
        "staticPodPath": "",
        # No image can be pulled again here: never collect one.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "serializeImagePulls": False, "rotateCertificates": False,
        # kube-proxy owns the node's iptables rules; the kubelet's own chains (KUBE-FIREWALL and
        # its canaries) would only outlive the bed.
        "makeIPTablesUtilChains": False,
        "registerNode": True, "maxPods": 110,
        # syncFrequency (1 minute), nodeStatusReportFrequency (5 minutes, or at once on a change)
        # and fileCheckFrequency (no static pods here) stay at their defaults: at 10 s each, the
        # idle bed's services (the kubelet, the API server, etcd) took about 15 % more CPU, and
        # no test waits on any of them.
        "shutdownGracePeriod": "0s",
        "logging": {"verbosity": 1}}


def kube_proxy_config(layout: NodeLayout, kubeconfig: Path) -> Dict:
    """kube-proxy's configuration: iptables mode for ClusterIP Services."""
    _, healthz, metrics = layout.healthz_ports
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables", "clusterCIDR": layout.subnet, "hostnameOverride": NODE_NAME,
        "bindAddress": layout.node_ip,
        "healthzBindAddress": f"127.0.0.1:{healthz}", "metricsBindAddress": f"127.0.0.1:{metrics}",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        # Leave the host's conntrack table size alone (a VM may not allow setting it).
        "conntrack": {"maxPerCore": 0},
        "iptables": {"masqueradeAll": False, "syncPeriod": "10s", "minSyncPeriod": "0s"}}


def resolv_conf() -> str:
    """The resolver configuration the kubelet gives pods with `dnsPolicy: Default` and CoreDNS:
    none upstream (no network but the cluster's), so it names the cluster DNS itself."""
    return f"nameserver {CLUSTER_DNS_IP}\noptions ndots:1\n"
