"""The pytest fixtures of the test beds (`bed.py`): the genuine node's, shared by the run's
pytest workers (`node_bed`, `shared_bed`); a cluster on Trainer v2.1 (`trainer_v2_1_bed`, after
that one: one genuine node per machine); the control plane alone (`bare_api`). Each starts
(building what the cache lacks) and, at the end, stops and is checked that nothing of it is left.
`bed_namespace` and `node_namespace` give a test a namespace of its own (`namespaces`): kfdist's
pipeline-runner ServiceAccount and Role bound in it, and a kubeconfig with that ServiceAccount's
token, what the training step runs with on a cluster. Registered by tests/conftest.py, which
stops each bed right after the last test that uses it (`stop_bed`): a bed does not idle on the
worker's cores while that worker's other tests run.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from cluster import bed as test_bed
from cluster import node, node_teardown, one_node, operators, processes, shared_bed
from cluster.bed import REPO
from cluster.namespaces import runner_namespace

#: How long `trainer_v2_1_bed` waits for the machine's node to be free.
NODE_FREE_WAIT_S = 2400.0
#: {bed fixture name: its stop-and-check}, while the bed runs.
_stops: dict = {}
#: The bed fixtures this process stopped (or left).
_stopped: set = set()


def stop_bed(fixture: str) -> None:
    """Stops the bed of `fixture` and checks that nothing of it is left, once; a bed that is not
    running (never started, or stopped already) is left as it is."""
    stop = _stops.pop(fixture, None)
    if stop is not None:
        _stopped.add(fixture)
        stop()


def stopped_beds() -> set:
    """The bed fixtures stopped in this process: pytest keeps a session fixture's value, so a
    later test given one would get a bed that is gone."""
    return set(_stopped)


@pytest.fixture(scope="session")
def trainer_v2_1_bed(tmp_path_factory, kfdist_images):
    """A bed standing for a cluster on Trainer v2.1: the genuine node with JobSet v0.10 and
    Trainer v2.1 alone, kfdist's runtimes installed through v2.1's own webhook. It waits until
    the machine's node is free (`node_bed` stopped: tests/conftest.py runs its tests last)."""
    root = tmp_path_factory.mktemp("trainer-v2.1-bed")
    one_node.wait_until_free(node.cache_dir(), NODE_FREE_WAIT_S)
    bed = test_bed.start(root, stack="trainer-v2.1", pod_images=(kfdist_images["runtime"],),
                         owned=True)
    _stops["trainer_v2_1_bed"] = lambda: _stop_node_bed(root)
    try:
        _install_runtimes(bed)
    except BaseException:
        stop_bed("trainer_v2_1_bed")
        raise
    yield bed
    stop_bed("trainer_v2_1_bed")


@pytest.fixture(scope="session")
def bare_api(tmp_path_factory):
    """The control plane alone: a cluster where nothing of Kubeflow is installed (a test installs
    the CRDs it needs as the administrator, and removes them)."""
    root = tmp_path_factory.mktemp("bare-api")
    bed = test_bed.start(root, stack="control-plane", owned=True)
    _stops["bare_api"] = lambda: _check_stopped(root, test_bed.stop(root))
    yield bed
    stop_bed("bare_api")


@pytest.fixture(scope="session")
def node_bed(tmp_path_factory, kfdist_images):
    """A bed on the genuine node (kubelet, containerd, kube-proxy, CoreDNS, the provisioner),
    the operators and Kubeflow Pipelines' backend (`DIR/kfp-host`), kfdist's runtime and Horovod
    images and the Debian base (test pods, the Training Operator's init container) in its
    containerd. One for the whole run, whichever workers use it (`shared_bed`); stopped by
    the last of them and checked that nothing of it is left: no process, shim, mount, bridge or
    kube-proxy rule."""
    root = shared_bed.run_root(tmp_path_factory, "node-bed")
    images = (kfdist_images["runtime"], kfdist_images["horovod"], operators.INIT_IMAGE)
    bed = shared_bed.enter(root, lambda where: _start_node_bed(where, images))
    _stops["node_bed"] = lambda: shared_bed.leave(root, _stop_node_bed)
    yield bed
    stop_bed("node_bed")


def _start_node_bed(root: Path, pod_images) -> test_bed.Bed:
    """Starts the genuine node's bed in `root` with kfdist's runtimes installed."""
    bed = test_bed.start(root, stack="node", pod_images=pod_images, owned=True,
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
    _check_stopped(root, test_bed.stop(root))
    assert node_teardown.leftovers(root, layout) == {}, "the genuine node left these behind"


def _check_stopped(root: Path, forced: dict) -> None:
    """Checks that the bed in `root` stopped on SIGTERM (`forced`: what `bed.stop` returned) and
    that none of its processes is left."""
    assert processes.running(root) == [], "test bed processes outlived down"
    assert not forced["killed"], f"did not stop on SIGTERM: {forced['killed']}"


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


#: Where a step run on this host finds its claim, as a pipeline step's pod has it mounted.
MOUNT = Path("/mnt/kfdist")


@contextlib.contextmanager
def _mounted(claim: Path):
    """`claim` (a claim's directory on the node) at /mnt/kfdist here, as in a pod that mounts it."""
    assert not MOUNT.exists() or MOUNT.is_symlink(), f"{MOUNT} is a real directory: not ours"
    MOUNT.parent.mkdir(parents=True, exist_ok=True)
    if MOUNT.is_symlink():
        MOUNT.unlink()
    MOUNT.symlink_to(claim)
    try:
        yield claim
    finally:
        MOUNT.unlink()


@pytest.fixture
def host_mount():
    """Links a claim's directory at /mnt/kfdist for a while (`with host_mount(path):`). The
    machine has one /mnt/kfdist: the tests using it are one xdist group (tests/conftest.py)."""
    return _mounted


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


def _fresh_namespace(bed: test_bed.Bed, tmp_path: Path, monkeypatch):
    """A fresh namespace of `bed`; `KUBECONFIG` is its pipeline runner's (deleted after)."""
    namespace = runner_namespace(bed, tmp_path, monkeypatch)
    yield namespace
    bed.kubectl_run("delete", "namespace", namespace.name, "--wait=false", check=False)


@pytest.fixture
def bed_namespace(node_bed, tmp_path, monkeypatch):
    """`node_namespace`, for the tests of the xdist group that runs kfdist's training step on
    this host against the genuine node with its claim at /mnt/kfdist (tests/conftest.py: one
    /mnt/kfdist per machine); the other tests on the node are another group."""
    yield from _fresh_namespace(node_bed, tmp_path, monkeypatch)


@pytest.fixture
def node_namespace(node_bed, tmp_path, monkeypatch):
    """A fresh namespace of the genuine node's bed; `KUBECONFIG` is its pipeline runner's
    (deleted after the test)."""
    yield from _fresh_namespace(node_bed, tmp_path, monkeypatch)


@pytest.fixture
def bare_namespace(bare_api, tmp_path, monkeypatch):
    """A namespace of `bare_api` with the pipeline runner's Role, `KUBECONFIG` its token's; after
    the test, the namespace goes and so does every cluster-wide object the test installed (CRDs,
    kfdist's reader ClusterRole)."""
    yield from _fresh_namespace(bare_api, tmp_path, monkeypatch)
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
