"""The command lines of etcd, kube-apiserver and kube-controller-manager, and the kubeconfigs.

Pure functions of the test bed's layout (`Layout`): what starts them is `bed.py`. The API server
runs with RBAC, ServiceAccount tokens and the default admission plugins, like a real cluster's;
the controller manager with the garbage collector, the Job controller and the other default
controllers, each under its own ServiceAccount.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Dict, List

#: The range the API server hands Services' cluster IPs from (kube-proxy routes them).
SERVICE_RANGE = "10.96.0.0/24"
#: What the API server and the controller manager log (`-v`): warnings and start-up.
VERBOSITY = "1"
#: The API server's audit policy: every request of a ServiceAccount outside kube-system and
#: Kubeflow Pipelines' namespace (the accounts the tests give kfdist; the operators, the node and
#: the administrator use certificates, the controller manager's controllers kube-system's
#: accounts), at the Metadata
#: level: who asked what of which resource, and the answer's code. A test reads from it that a
#: refusal happened before any call.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [{"level": "None", "userGroups": ["system:serviceaccounts:kube-system",
                                               "system:serviceaccounts:kubeflow"]},
              {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
              {"level": "None"}]}


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where one test bed keeps its files, and its ports (all on 127.0.0.1)."""

    root: Path
    etcd_port: int
    etcd_peer_port: int
    api_port: int
    #: Where the API server listens: loopback, or the genuine node's address (the pods reach
    #: it there through the `kubernetes` Service).
    api_host: str = "127.0.0.1"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def api_url(self) -> str:
        return f"https://{self.api_host}:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        """The administrator's kubeconfig (`system:masters`)."""
        return self.root / "kubeconfig"

    @property
    def audit_policy(self) -> Path:
        return self.root / "configs" / "audit-policy.json"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines; `AUDIT_POLICY` says what it holds)."""
        return self.root / "logs" / "audit.log"

    def component_kubeconfig(self, name: str) -> Path:
        """The kubeconfig of a control-plane component or operator."""
        return self.root / "kubeconfigs" / f"{name}.yaml"

    def to_json(self) -> Dict:
        return {"root": str(self.root), "etcd_port": self.etcd_port,
                "etcd_peer_port": self.etcd_peer_port, "api_port": self.api_port,
                "api_host": self.api_host}

    @classmethod
    def from_json(cls, data: Dict) -> "Layout":
        return cls(Path(data["root"]), data["etcd_port"], data["etcd_peer_port"], data["api_port"],
                   data.get("api_host", "127.0.0.1"))


def etcd_argv(etcd: str, layout: Layout) -> List[str]:
    """etcd on loopback, one member, without fsync (a test bed's data need not survive a crash)."""
    client = f"http://127.0.0.1:{layout.etcd_port}"
    peer = f"http://127.0.0.1:{layout.etcd_peer_port}"
    return [etcd, "--name", "test-bed", "--data-dir", str(layout.root / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test-bed={peer}", "--unsafe-no-fsync",
            "--listen-metrics-urls", "", "--log-level", "warn"]


def kine_argv(kine: str, layout: Layout) -> List[str]:
    """kine (etcd's API over SQLite) where etcd would listen: the datastore compared with etcd."""
    return [kine, "--listen-address", f"127.0.0.1:{layout.etcd_port}",
            "--endpoint", f"sqlite://{layout.root / 'kine.db'}?_journal=WAL&cache=shared",
            "--metrics-bind-address", "0"]


def apiserver_argv(apiserver: str, layout: Layout) -> List[str]:
    """kube-apiserver: client certificates and ServiceAccount tokens, RBAC, default admission."""
    pki = layout.pki
    return [apiserver,
            f"--etcd-servers=http://127.0.0.1:{layout.etcd_port}",
            f"--bind-address={layout.api_host}", f"--advertise-address={layout.api_host}",
            f"--secure-port={layout.api_port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            # The Node authorizer and NodeRestriction: a kubelet reads and writes only what its
            # own node's pods need.
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            # The issuer is the API server itself: a process that verifies the pods' projected
            # tokens (Trainer's status server) finds its discovery document and keys there.
            f"--service-account-issuer={layout.api_url}",
            f"--service-account-jwks-uri={layout.api_url}/openid/v1/jwks",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            # pods/log and exec: the API server reaches the kubelet's port with this.
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--audit-policy-file={layout.audit_policy}", f"--audit-log-path={layout.audit_log}",
            "--audit-log-maxbackup=0",
            "--allow-privileged=true", "--profiling=false",
            f"--cert-dir={pki / 'apiserver-generated'}", f"-v={VERBOSITY}"]


def controller_manager_argv(controller_manager: str, layout: Layout) -> List[str]:
    """kube-controller-manager: every default controller, each with its own ServiceAccount."""
    pki, kubeconfig = layout.pki, layout.component_kubeconfig("kube-controller-manager")
    return [controller_manager, f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            # A test's garbage must go quickly: collect terminated pods past 50 (not 12,500).
            "--terminated-pod-gc-threshold=50", f"-v={VERBOSITY}"]


def write_audit_policy(layout: Layout) -> None:
    """Writes `AUDIT_POLICY` where `apiserver_argv` points the API server."""
    layout.audit_policy.parent.mkdir(parents=True, exist_ok=True)
    layout.audit_policy.write_text(json.dumps(AUDIT_POLICY, indent=1))


def audit_events(layout: Layout, user: str) -> List[Dict]:
    """The audit log's entries for requests by `user` (e.g. `system:serviceaccount:ns:name`)."""
    if not layout.audit_log.exists():
        return []
    entries = (json.loads(line) for line in layout.audit_log.read_text().splitlines() if line)
    return [e for e in entries if e.get("user", {}).get("username") == user]


def kubeconfig(api_url: str, ca: Path, credentials: Dict[str, str], user: str,
               namespace: str = "default") -> str:
    """A kubeconfig (JSON, which is YAML) for the test bed.

    Args:
      api_url: The API server.
      ca: The bed's CA certificate.
      credentials: The kubeconfig `user` entry: a client certificate and key, or a token.
      user: The user's name in the file.
      namespace: The context's namespace.
    """
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kfdist-test-bed",
        "clusters": [{"name": "kfdist-test-bed", "cluster": {
            "server": api_url, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": dict(credentials)}],
        "contexts": [{"name": "kfdist-test-bed", "context": {
            "cluster": "kfdist-test-bed", "user": user, "namespace": namespace}}]}, indent=1)


def client_certificate(cert: Path, key: Path) -> Dict[str, str]:
    """A kubeconfig user's client certificate and key."""
    return {"client-certificate": str(cert), "client-key": str(key)}
