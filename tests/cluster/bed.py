"""Starts and stops one test bed in a directory: etcd, kube-apiserver and kube-controller-manager,
and (unless it is the control plane alone) kube-scheduler and the genuine node (`node.py`: the
kubelet on containerd, kube-proxy, CoreDNS, a volume provisioner), with the operators' own
controllers and Kubeflow Pipelines when asked; the API server listens on the node's bridge
address, which its pods reach.

    bed = start(Path("DIR"))   # returns once the node is Ready and every part answers
    stop(Path("DIR"))          # from any process: ends every process, pod, mount and rule

`DIR/kubeconfig` is the administrator's; `DIR/logs/` holds each process's log; `DIR/bed.json`
records the ports and the binaries.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional

from cluster import (certs, control_plane, kfp, kfp_ui, node, node_config, node_images,
                     node_teardown, one_node, operators, owners, processes, trainer_v2_1)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BED_RECORD = "bed.json"
#: How long each part may take to become ready (a cold machine's first start is the slowest).
START_TIMEOUT_S = 120.0
#: The API server's graceful termination takes about a second here, but now and then, after
#: logging "apiserver is exiting", its process does not end (seen on beds with CRDs deleted
#: while they ran): after this many seconds the bed sends the second SIGTERM, which the API
#: server's signal handler takes as "exit now".
APISERVER_SECOND_SIGTERM_AFTER_S = 5.0
#: The administrator (a client certificate in `system:masters`).
ADMIN = "kfdist-test-bed-admin"
#: Every name the API server's certificate serves.
API_HOSTS = ("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local", "10.96.0.1")


def build(names=()) -> Dict[str, str]:
    """Builds (or finds in the cache) the test bed's binaries: {name: path}."""
    result = subprocess.run(["bash", str(HERE / "build.sh"), *names], stdout=subprocess.PIPE,
                            text=True, check=False)
    if result.returncode != 0:
        raise processes.StartFailed(f"tests/cluster/build.sh failed (exit {result.returncode}); "
                                    "its output above says which binary")
    return dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.strip())


@dataclasses.dataclass
class Bed:
    """A running test bed."""

    layout: control_plane.Layout
    binaries: Dict[str, str]
    kubectl: str

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    def kubectl_run(self, *args: str, stdin: Optional[str] = None, check: bool = True,
                    kubeconfig: Optional[Path] = None) -> subprocess.CompletedProcess:
        """Runs kubectl against the bed (as the administrator unless `kubeconfig` says)."""
        result = subprocess.run([self.kubectl, f"--kubeconfig={kubeconfig or self.kubeconfig}",
                                 *args], input=stdin, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise processes.StartFailed(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result


def _kubectl() -> str:
    found = Path(sys.executable).parent / "kubectl"
    if found.exists():
        return str(found)
    return "kubectl"


def _certificates(pki: Path, node_layout: Optional[node_config.NodeLayout]) -> None:
    authority = certs.Authority(pki)
    node_hosts = (node_layout.node_ip,) if node_layout else ()
    authority.issue("apiserver", "kube-apiserver", hosts=API_HOSTS + node_hosts)
    authority.issue("admin", ADMIN, organization="system:masters")
    authority.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                    organization="system:masters")
    authority.issue("kube-controller-manager", "system:kube-controller-manager")
    authority.issue("serving", "kfdist-test-bed-serving", hosts=(
        "127.0.0.1", "localhost", *map(operators.service_host, operators.HOST_SERVICES)))
    certs.service_account_keys(pki)
    if node_layout:
        node.certificates(authority, node_layout)


#: The datastores the bed can run on: etcd (the default, what clusters run) or kine.
DATASTORES = ("etcd", "kine")
#: What a bed runs: `node` (the control plane, kube-scheduler and the genuine node: containerd,
#: the kubelet, kube-proxy, CoreDNS and the volume provisioner; the operators and Kubeflow
#: Pipelines too when asked); `control-plane` (etcd, the API server and the controller manager
#: alone: a cluster where nothing of Kubeflow is installed, and no pod runs); `trainer-v2.1` (the
#: genuine node with Trainer v2.1 and JobSet v0.10 alone: a cluster still on Trainer v2.1).
STACKS = ("node", "control-plane", "trainer-v2.1")
#: The stacks with the genuine node (one per machine: `one_node`).
NODE_STACKS = ("node", "trainer-v2.1")
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")
OPERATORS = ("training-operator", "mpi-operator", "jobset", "trainer-controller-manager", "kueue")
GENUINE_NODE = ("kube-scheduler", "kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2",
                "ctr", "crictl", *node.CNI_PLUGINS, "coredns", "local-path-provisioner")


#: `build.sh`'s name for Kubeflow Pipelines' binaries (its backend and UI, Argo's, MinIO's, the
#: gRPC-Web proxy's).
KFP_BINARIES = ("kfp",)


def _binaries_of(stack: str, datastore: str, with_kfp: bool = False,
                 with_operators: bool = False) -> tuple:
    names = {"control-plane": CONTROL_PLANE,
             "trainer-v2.1": CONTROL_PLANE + GENUINE_NODE + trainer_v2_1.BINARIES,
             "node": CONTROL_PLANE + GENUINE_NODE}[stack]
    return tuple(datastore if name == "etcd" else name for name in names) + (
        KFP_BINARIES if with_kfp else ()) + (OPERATORS if with_operators else ())


def start(root: Path, binaries: Optional[Dict[str, str]] = None, datastore: str = "etcd",
          stack: str = "node", pod_images=(), owned: bool = False, with_kfp: bool = False,
          with_operators: bool = False) -> Bed:
    """Starts a test bed in `root` (created; must hold no running bed) and waits until it is ready.

    On any failure everything started so far is stopped again and `StartFailed` says why.

    Args:
      root: The bed's directory.
      binaries: {name: path} of its binaries; None: `build()` them.
      datastore: `etcd`, or `kine` (SQLite; built only on request: `build.sh kine`).
      stack: What runs besides the datastore and the API server (`STACKS`).
      pod_images: podman images the genuine node's pods run (imported into its containerd).
      owned: Whether the bed belongs to this process (a test session): should it die, the next
        bed started on the machine stops this one (`owners`).
      with_kfp: Also run Kubeflow Pipelines' backend and UI (`kfp.py`; on the genuine node
        only); its API's address is written to `DIR/kfp-host`, its UI's to `DIR/kfp-ui`.
      with_operators: With `node`, also run the operators: the MPI Operator as its release's
        Deployment (`operator_pods`), the others as processes.
    """
    if datastore not in DATASTORES:
        raise processes.StartFailed(f"datastore {datastore!r}: expected one of {DATASTORES}")
    if stack not in STACKS:
        raise processes.StartFailed(f"stack {stack!r}: expected one of {STACKS}")
    if (with_kfp or with_operators) and stack != "node":
        raise processes.StartFailed(f"Kubeflow Pipelines and the operators run with --stack "
                                    f"node, not {stack!r}")
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    owners.stop_orphans(stop)
    if processes.running(root):
        raise processes.StartFailed(f"a test bed is already running in {root}: "
                                    f"bash tests/cluster/down.sh {root}")
    node_teardown.clean(root)  # what a bed that crashed here left
    binaries = binaries or build(_binaries_of(stack, datastore, with_kfp, with_operators))
    node_layout = node.plan(root) if stack in NODE_STACKS else None
    layout = control_plane.Layout(root, processes.free_port(), processes.free_port(),
                                  processes.free_port(),
                                  node_layout.node_ip if node_layout else "127.0.0.1")
    bed = Bed(layout, binaries, _kubectl())
    (root / BED_RECORD).write_text(json.dumps({"layout": layout.to_json(), "binaries": binaries,
                                               "kubectl": bed.kubectl}, indent=1))
    if owned:
        owners.register(root)
    try:
        if node_layout:
            one_node.take(node.cache_dir(), root)
            node.create_bridge(node_layout)  # the API server listens on its address
        _start(bed, datastore, stack, node_layout, pod_images, with_kfp, with_operators)
    except BaseException:
        stop(root)
        raise
    return bed


def _start(bed: Bed, datastore: str, stack: str,
           node_layout: Optional[node_config.NodeLayout], pod_images, with_kfp: bool,
           with_operators: bool) -> None:
    layout, binaries = bed.layout, bed.binaries
    pki = layout.pki
    _certificates(pki, node_layout)
    procs = processes.Processes(layout.root)

    argv = (control_plane.etcd_argv(binaries["etcd"], layout) if datastore == "etcd"
            else control_plane.kine_argv(binaries["kine"], layout))
    procs.start(datastore, argv)
    procs.wait_until(datastore, lambda: processes.port_open(layout.etcd_port), START_TIMEOUT_S)

    control_plane.write_audit_policy(layout)
    procs.start("kube-apiserver", control_plane.apiserver_argv(binaries["kube-apiserver"], layout),
                second_sigterm_after_s=APISERVER_SECOND_SIGTERM_AFTER_S)
    procs.wait_until("kube-apiserver", lambda: processes.https_ok(
        f"{layout.api_url}/readyz", pki / "ca.crt", pki / "admin.crt", pki / "admin.key"),
        START_TIMEOUT_S)

    layout.kubeconfig.write_text(control_plane.kubeconfig(
        layout.api_url, pki / "ca.crt",
        control_plane.client_certificate(pki / "admin.crt", pki / "admin.key"), ADMIN))
    layout.component_kubeconfig("kube-controller-manager").parent.mkdir(exist_ok=True)
    layout.component_kubeconfig("kube-controller-manager").write_text(control_plane.kubeconfig(
        layout.api_url, pki / "ca.crt", control_plane.client_certificate(
            pki / "kube-controller-manager.crt", pki / "kube-controller-manager.key"),
        "system:kube-controller-manager"))
    procs.start("kube-controller-manager", control_plane.controller_manager_argv(
        binaries["kube-controller-manager"], layout))
    # Ready once its root-CA publisher has written the CA into the default namespace.
    procs.wait_until("kube-controller-manager", lambda: bed.kubectl_run(
        "get", "configmap", "kube-root-ca.crt", "-n", "default", check=False).returncode == 0,
        START_TIMEOUT_S)

    if stack == "control-plane":
        return
    scheduler = node.write_kubeconfig(bed, "kube-scheduler", "kube-scheduler",
                                      "system:kube-scheduler")
    procs.start("kube-scheduler", node.scheduler_argv(binaries["kube-scheduler"], scheduler))
    kfp_images = node_images.build_kfp_images(binaries) if with_kfp else {}
    operator_images = (node_images.build_operator_image(
        "mpi-operator", binaries["mpi-operator"]),) if with_operators else ()
    node.start(bed, procs, node_layout, binaries,
               (*pod_images, *kfp_images.values(), *operator_images))
    if with_operators:
        operators.start_operators(bed, procs, *operator_images, host_ip=node_layout.node_ip)
    if with_kfp:
        kfp.start(bed, procs, node_layout.node_ip, binaries, kfp_images)
    if stack == "trainer-v2.1":
        trainer_v2_1.start(bed, procs)


def load(root: Path) -> Bed:
    """The test bed recorded in `root` (started by `start`, perhaps in another process)."""
    record = json.loads((Path(root) / BED_RECORD).read_text())
    return Bed(control_plane.Layout.from_json(record["layout"]), record["binaries"],
               record["kubectl"])


def stop(root: Path) -> Dict[str, list]:
    """Ends every process of the bed in `root`, then what its node leaves (pods, mounts, the
    bridge, kube-proxy's rules).

    Returns:
      {"killed": processes that ignored SIGTERM}.
    """
    root = Path(root).resolve()
    # containerd outlives the kubelet until the node's pods are gone (through its CRI).
    killed = processes.stop_all(root, keep=("containerd",))
    node_teardown.stop_pods(root)
    killed += processes.stop_all(root)
    node_teardown.clean(root)
    one_node.give_back(node.cache_dir(), root)
    owners.unregister(root)
    return {"killed": killed}


def runtime_image() -> str:
    """Builds kfdist's runtime image with `containers/build.sh` (podman; its layers cached), for
    the genuine node's pods (a TFJob's replicas, KFP's steps); returns its reference."""
    import kfdist

    print("building kfdist's runtime image (containers/build.sh runtime)", file=sys.stderr)
    result = subprocess.run(["bash", str(REPO / "containers" / "build.sh"), "--engine", "podman",
                             "runtime"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO)
    if result.returncode != 0:
        raise processes.StartFailed(f"containers/build.sh runtime failed:\n"
                                    f"{result.stdout[-3000:]}")
    return kfdist.RUNTIME_IMAGE


def main(argv=None) -> int:
    """`python -m cluster.bed up|down DIR [--stack STACK]` (what up.sh and down.sh run)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cluster.bed")
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("root", type=Path, metavar="DIR")
    parser.add_argument("--stack", choices=STACKS, default="node",
                        help="what runs (up only; default: node)")
    parser.add_argument("--with-operators", action="store_true",
                        help="also run the operators (up only; with --stack node)")
    parser.add_argument("--with-kfp", action="store_true",
                        help="also run Kubeflow Pipelines' backend and UI (up only; with --stack "
                             "node); DIR/kfp-host holds its API's address, DIR/kfp-ui its UI's")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command, root = args.command, args.root
    if command == "down":
        if not (root / BED_RECORD).exists() and not (root / processes.RECORD).exists():
            print(f"down: no test bed in {root} (no {BED_RECORD})", file=sys.stderr)
            return 1
        forced = stop(root)
        print(f"stopped the test bed in {root}"
              + (f" (killed: {', '.join(forced['killed'])})" if forced["killed"] else ""))
        return 0
    started = time.monotonic()
    try:
        pod_images = (runtime_image(),) if args.stack in NODE_STACKS else ()
        bed = start(root, stack=args.stack, with_kfp=args.with_kfp, pod_images=pod_images,
                    with_operators=args.with_operators)
    except processes.StartFailed as error:
        print(f"up: the test bed did not start: {error}", file=sys.stderr)
        return 1
    print(f"test bed ready in {time.monotonic() - started:.1f} s; "
          f"export KUBECONFIG={bed.kubeconfig}")
    if args.with_kfp:
        print(f"Kubeflow Pipelines: {(root / kfp.KFP_HOST_FILE).read_text().strip()}; "
              f"its UI: {kfp_ui.address(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
