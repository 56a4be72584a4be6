"""The pytest fixtures of the real control plane: one test bed for the whole test session.

`kube_bed` starts it (building what the cache lacks) and, at the end, stops it and checks that no
process, container or network of it is left; `node_bed`, the genuine node's, is shared by the
run's pytest workers (`shared_bed`). `bed_namespace` and `node_namespace` give a test a namespace
of its own (`namespaces`): kfdist's pipeline-runner ServiceAccount and Role bound in it, and a
kubeconfig with that ServiceAccount's token, what the training step runs with on a cluster.
Registered by tests/conftest.py, which stops each bed right after the last test that uses it
(`stop_bed`): a bed does not idle on the worker's cores while that worker's other tests run.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from cluster import bed as test_bed
from cluster import node, node_runtime, processes, shared_bed
from cluster.bed import REPO
from cluster.namespaces import runner_namespace
from cluster.node_agent.podspec import BED_LABEL
from cluster.node_agent.runtime import network_name

#: {bed fixture name: its stop-and-check}, while the bed runs.
_stops: dict = {}


def stop_bed(fixture: str) -> None:
    """Stops the bed of `fixture` and checks that nothing of it is left, once; a bed that is not
    running (never started, or stopped already) is left as it is."""
    stop = _stops.pop(fixture, None)
    if stop is not None:
        stop()


@pytest.fixture(scope="session")
def kube_bed(tmp_path_factory):
    """The running test bed (`bed.Bed`)."""
    with _running_bed(tmp_path_factory.mktemp("kube-bed"), "all", "kube_bed") as bed:
        yield bed


@pytest.fixture(scope="session")
def trainer_v2_1_bed(tmp_path_factory):
    """A second bed, standing for a cluster on Trainer v2.1 (with JobSet v0.10, no other
    operator), kfdist's runtimes installed through Trainer v2.1's own webhook."""
    with _running_bed(tmp_path_factory.mktemp("trainer-v2.1-bed"), "trainer-v2.1",
                      "trainer_v2_1_bed") as bed:
        yield bed


@pytest.fixture(scope="session")
def bare_api(tmp_path_factory):
    """The control plane alone: a cluster where nothing of Kubeflow is installed (a test installs
    the CRDs it needs as the administrator, and removes them)."""
    with _running_bed(tmp_path_factory.mktemp("bare-api"), "control-plane", "bare_api") as bed:
        yield bed


@pytest.fixture(scope="session")
def node_bed(tmp_path_factory, kfdist_images):
    """A bed on the genuine node (kubelet, containerd, kube-proxy, CoreDNS, the provisioner),
    the operators and Kubeflow Pipelines' backend (`DIR/kfp-host`), kfdist's runtime image in
    its containerd. One for the whole run, whichever workers use it (`shared_bed`); stopped by
    the last of them and checked that nothing of it is left: no process, shim, mount, bridge or
    kube-proxy rule."""
    root = shared_bed.run_root(tmp_path_factory, "node-bed")
    bed = shared_bed.enter(root, lambda where: _start_node_bed(where, kfdist_images["runtime"]))
    _stops["node_bed"] = lambda: shared_bed.leave(root, _stop_node_bed)
    yield bed
    stop_bed("node_bed")


def _start_node_bed(root: Path, runtime_image: str) -> test_bed.Bed:
    """Starts the genuine node's bed in `root` with kfdist's runtimes installed."""
    bed = test_bed.start(root, stack="node", pod_images=(runtime_image,), owned=True,
                         with_kfp=True, with_operators=True)
    try:
        _install_runtimes(bed)
    except BaseException:
        _stop_node_bed(root)
        raise
    return bed


def _stop_node_bed(root: Path) -> None:
    """Stops the genuine node's bed in `root` and checks that nothing of it is left."""
    layout = node.layout_of(root)
    forced = test_bed.stop(root)
    assert processes.running(root) == [], "test bed processes outlived down"
    assert not forced["killed"], f"did not stop on SIGTERM: {forced['killed']}"
    assert node.leftovers(root, layout) == {}, "the genuine node left these behind"


@contextlib.contextmanager
def _running_bed(root: Path, stack: str, fixture: str):
    """A bed of `stack` in `root` (the bed of `fixture`), with kfdist's runtimes where Trainer
    runs; at the end (or at `stop_bed`), stopped and checked that no process, container or
    network of it is left."""
    bed = test_bed.start(root, stack=stack, owned=True)
    try:
        if stack != "control-plane":
            _install_runtimes(bed)
    except BaseException:
        test_bed.stop(root)
        raise
    _stops[fixture] = lambda: _stop_agent_bed(root)
    yield bed
    stop_bed(fixture)


def _install_runtimes(bed: test_bed.Bed) -> None:
    """kfdist's runtimes, as the README installs them (through Trainer's validating webhook);
    returns once Trainer's webhook finds them (a TrainJob naming one passes a server-side dry
    run: the controller's cache can lag the API server on a loaded machine)."""
    bed.kubectl_run("apply", "--server-side", "-k", str(REPO / "manifests" / "runtimes"))
    for runtime in ("kfdist-tensorflow", "kfdist-horovod"):
        probe = json.dumps({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                            "metadata": {"name": "probe", "namespace": "default"},
                            "spec": {"runtimeRef": {"name": runtime}}})
        wait_for(lambda: bed.kubectl_run("create", "--dry-run=server", "-f", "-", stdin=probe,
                                         check=False).returncode == 0,
                 60, f"Trainer's webhook to find the runtime {runtime}", every=0.5)


def _stop_agent_bed(root: Path) -> None:
    """Stops the bed in `root` (its pods on the node agent) and checks that no process,
    container or network of it is left."""
    forced = test_bed.stop(root)
    assert processes.running(root) == [], "test bed processes outlived down"
    assert not forced["killed"], f"did not stop on SIGTERM: {forced['killed']}"
    left = subprocess.run(["podman", "ps", "-a", "--filter",
                           f"label={BED_LABEL}={node_runtime.bed_id(root)}", "--format",
                           "{{.Names}}"], capture_output=True, text=True).stdout.split()
    assert left == [], f"containers left: {left}"
    from cluster.node_agent.runtime import CONTAINERS_FILE

    assert node_runtime.kill_container_processes(root / CONTAINERS_FILE) == [], \
        "processes of the bed's containers outlived down"
    network = network_name(node_runtime.bed_id(root))
    assert subprocess.run(["podman", "network", "exists", network]).returncode != 0, network


@pytest.fixture
def bed_gcs_emulator(kube_bed, monkeypatch):
    """A GCS emulator the bed's pods reach (at their network's gateway, the host): every
    container started during the test gets `STORAGE_EMULATOR_HOST` from the node, as a
    cluster's pods reach their object store without the job naming it; this process reaches it
    on 127.0.0.1."""
    from cluster.node_agent.agent import NODE_ENV
    from fakes import gcs_emulator

    found = subprocess.run(["podman", "network", "inspect", network_name(
        node_runtime.bed_id(kube_bed.root))], capture_output=True, text=True, check=True)
    gateway = json.loads(found.stdout)[0]["subnets"][0]["gateway"]
    port = gcs_emulator.free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # On every address: the gateway's exists only while a pod is on the network.
    server, log = gcs_emulator.start_server("0.0.0.0", port)
    node_env = kube_bed.root / NODE_ENV
    try:
        gcs_emulator.wait_until_serving(server, endpoint, log)
        node_env.write_text(json.dumps({"STORAGE_EMULATOR_HOST": f"http://{gateway}:{port}",
                                        "GOOGLE_CLOUD_PROJECT": gcs_emulator.PROJECT}))
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", gcs_emulator.PROJECT)
        yield gcs_emulator.GcsEmulator(endpoint=endpoint)
    finally:
        node_env.unlink(missing_ok=True)
        gcs_emulator.stop_server(server, log)


#: The longest pause between two polls of `wait_for`: most predicates run kubectl, about 0.1
#: CPU-seconds a call, and a test polling it back to back took most of a core from the replicas
#: it waited on.
POLL_AT_MOST_S = 1.0


def wait_for(predicate, seconds: float = 20.0, what: str = "the condition",
             every: float = 0.05):
    """Polls `predicate` until it returns something true (returned), failing after `seconds`:
    first after `every` seconds, then half as long again each time, up to `POLL_AT_MOST_S` (or
    `every`, when longer)."""
    deadline = time.monotonic() + seconds
    pause, longest = every, max(every, POLL_AT_MOST_S)
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
        pause = min(pause * 1.5, longest)
    raise AssertionError(f"{what} did not hold within {seconds} s")


def sigkill_once(process: subprocess.Popen, done, seconds: float) -> list:
    """`read_until(process, done, seconds)`, then SIGKILLs the process (whatever happened: no
    clean-up of its own runs, as when a node dies); returns the lines read."""
    try:
        return read_until(process, done, seconds)
    finally:
        process.kill()
        process.wait()


def read_until(process: subprocess.Popen, done, seconds: float) -> list:
    """Reads `process`'s output lines until `done(lines so far)` holds (returned), failing if
    the process ends first or `seconds` pass; the lines keep being read in a thread after."""
    import queue
    import threading

    printed: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [printed.put(line) for line in process.stdout],
                     daemon=True).start()
    seen: list = []
    deadline = time.monotonic() + seconds
    while not done(seen):
        assert time.monotonic() < deadline and process.poll() is None, "".join(seen[-40:])
        try:
            seen.append(printed.get(timeout=0.5))
        except queue.Empty:
            pass
    return seen


@pytest.fixture
def bed_namespace(kube_bed, tmp_path, monkeypatch):
    """A fresh namespace; `KUBECONFIG` is its pipeline runner's (deleted after the test)."""
    namespace = runner_namespace(kube_bed, tmp_path, monkeypatch)
    yield namespace
    kube_bed.kubectl_run("delete", "namespace", namespace.name, "--wait=false", check=False)


@pytest.fixture
def node_namespace(node_bed, tmp_path, monkeypatch):
    """A fresh namespace of the genuine node's bed; `KUBECONFIG` is its pipeline runner's
    (deleted after the test)."""
    namespace = runner_namespace(node_bed, tmp_path, monkeypatch)
    yield namespace
    node_bed.kubectl_run("delete", "namespace", namespace.name, "--wait=false", check=False)


@pytest.fixture
def bare_namespace(bare_api, tmp_path, monkeypatch):
    """A namespace of `bare_api` with the pipeline runner's Role, `KUBECONFIG` its token's; after
    the test, the namespace goes and so does every cluster-wide object the test installed (CRDs,
    kfdist's reader ClusterRole)."""
    namespace = runner_namespace(bare_api, tmp_path, monkeypatch)
    yield namespace
    bare_api.kubectl_run("delete", "namespace", namespace.name, "--wait=false", check=False)
    remove_crds(bare_api)
    bare_api.kubectl_run("delete", "clusterrole,clusterrolebinding", "kfdist-trainer-reader",
                         "--ignore-not-found", check=False)


def remove_crds(bed: test_bed.Bed) -> None:
    """Every CRD of `bed` gone, and its objects first, so that the API server's cleanup finalizer
    has nothing left to wait for; a CRD still there after 100 s fails the test with the conditions
    the API server gave it and the end of its log (the next test would install it again)."""
    crds = bed.kubectl_run("get", "crd", "--output=jsonpath={.items[*].metadata.name}").stdout
    if crds.split():
        bed.kubectl_run("delete", ",".join(crds.split()), "--all", "--all-namespaces",
                        "--wait=true", "--timeout=60s", check=False)
    done = bed.kubectl_run("delete", "crd", "--all", "--wait=true", "--timeout=100s", check=False)
    if done.returncode != 0:
        left = json.loads(bed.kubectl_run("get", "crd", "--output=json").stdout)["items"]
        conditions = "\n".join(f"{crd['metadata']['name']}: {crd['status'].get('conditions')}"
                               for crd in left)
        log = processes.log_tail(bed.root / "logs" / "kube-apiserver.log")
        raise AssertionError(f"CRDs not deleted: {done.stderr.strip()}\n{conditions}\n{log}")
