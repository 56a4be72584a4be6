"""The launcher's remaining claims on the real control plane: `kfdist render` prints the object the
step creates (after the API server's own defaulting and admission, on both sides), an own job
that failed in an earlier attempt is replaced, a job of the same name that the step did not create
is left alone, a queued job's timeout counts from Kueue's admission when asked, and a TrainJob's
failure, timeout, unknown runtime and RBAC refusal are reported as Trainer and the API server
give them.

The step and the launcher run here with the pipeline runner's ServiceAccount token (the
namespace's `KUBECONFIG`); the Training Operator, the MPI Operator, Trainer and Kueue are the real
ones of the test bed.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Dict, List

import pytest

from cluster.fixture import wait_for
from containers import test_run_on_the_bed as run_on_the_bed
from containers.test_run_on_the_bed import CLAIM, MOUNT, _conditions
from kfdist import render_cmd
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TFJOB_V1, RenderedJob
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    AdmissionDeniedError, PermissionDeniedError)
from kfdist.components.train_distributed.kubernetes.lifecycle.job_adoption import (
    SPEC_HASH_ANNOTATION, JobNameConflictError, prepare_body)
from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import QUEUE_NAME_LABEL
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import (
    JobTimeoutError, launch_and_wait)
from kfdist.step_flags import step_values
from fakes.kube_server.sample_jobs import sample_trainjob

pytestmark = pytest.mark.slow
work_pvc = run_on_the_bed.work_pvc  # the PVC at /mnt/kfdist, as there

#: The configurations the renderers are validated with. None of their replicas can start here
#: (GPUs, a node selector no node has, a queue that does not exist): the step creates the job
#: and gives up at its timeout, which is all the comparison needs.
CONFIGURATIONS = {
    "tfjob-mwms-chief-3x4gpu": ["--backend", "tfjob", "--strategy", "multi_worker_mirrored",
                                "--workers", "3", "--chief", "--gpus-per-worker", "4",
                                "--cpu-per-worker", "4", "--memory-per-worker", "16Gi"],
    "tfjob-ps-chief-2ps-4w-eval": ["--backend", "tfjob", "--strategy", "parameter_server",
                                   "--workers", "4", "--ps", "2", "--evaluator",
                                   "--node-selector", "pool=cpu", "--backoff-limit", "2",
                                   "--active-deadline-seconds", "600",
                                   "--service-account", "trainer"],
    "mpijob-4x2": ["--backend", "mpijob", "--strategy", "horovod", "--workers", "4",
                   "--slots-per-worker", "2", "--gpus-per-worker", "2"],
    "trainjob-ps-queued": ["--backend", "trainjob", "--strategy", "parameter_server",
                           "--workers", "3", "--ps", "2", "--evaluator", "--gpus-per-worker", "1",
                           "--node-selector", "pool=gpu", "--queue-name", "team-a",
                           "--service-account", "trainer"],
}
#: What the API server keeps of what a client sent, beside the spec.
KEPT_METADATA = ("name", "namespace", "labels", "annotations")
#: A worker that fails the first time it runs in a namespace and succeeds after (a marker on the
#: PVC): an earlier attempt's failed job, then a replacement that trains.
FAILS_ONCE = ("import os, sys; marker = '/mnt/kfdist/attempted'; first = not os.path.exists(marker);"
              " open(marker, 'w').close(); print('first attempt' if first else 'trained', "
              "flush=True); sys.exit(1 if first else 0)")


def _parse(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kfdist")
    render_cmd.add_render_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["render"] + argv)


def _kept(obj: Dict) -> Dict:
    """The parts of a job object its creator chose (after the server's defaulting), less the
    time Trainer's webhook stamps on each runtime patch as it admits the object."""
    spec = json.loads(json.dumps(obj["spec"]))
    for patch in spec.get("runtimePatches", []):
        patch.pop("time", None)
    return {"metadata": {k: obj["metadata"].get(k) for k in KEPT_METADATA}, "spec": spec}


def _differences(a, b, path: str = "") -> List[str]:
    """Where two JSON values differ, as `path: a != b` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b))
                for d in _differences(a.get(key), b.get(key), f"{path}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_render_prints_the_object_the_step_creates(name, bed_namespace, work_pvc, kfdist_images,
                                                   digits_dataset, tmp_path):
    """The job the step created, as the API server stored it, equals the render's object put
    through the same server with `kubectl create --dry-run=server` (defaulting, webhooks)."""
    ns = bed_namespace
    args = _parse(CONFIGURATIONS[name] + [
        "--namespace", ns.name, "--run-id", f"run-{name}", "--task-name", "train",
        "--timeout-seconds", "15", "--pvc-name", CLAIM, "--work-uri", f"{MOUNT}/{name}"])
    rendered, _, _, _ = render_cmd.render_from_args(args)
    plural = rendered["kind"].lower()
    created: Dict = {}

    def capture() -> None:
        deadline = time.monotonic() + 120
        while not created and time.monotonic() < deadline:
            found = ns.get(plural)
            if found:
                created.update(found[0])
            time.sleep(0.1)

    watcher = threading.Thread(target=capture)
    watcher.start()
    with pytest.raises(JobTimeoutError):
        runtime.train(digits_dataset, str(tmp_path / "model"), log=lambda line: None,
                      **step_values(args))
    watcher.join()
    assert created, f"no {plural} appeared"
    wait_for(lambda: not ns.get(plural), seconds=60, what="the step's job to be deleted")
    dry_run = ns.bed.kubectl_run("create", "--dry-run=server", "-o", "json", "-f", "-",
                                 stdin=json.dumps(rendered), kubeconfig=ns.kubeconfig)
    expected = _kept(json.loads(dry_run.stdout))
    assert _kept(created) == expected, _differences(_kept(created), expected)
    assert created["metadata"]["annotations"][SPEC_HASH_ANNOTATION]


def _tfjob(ns, name: str, command: str, labels: Dict[str, str] = None) -> RenderedJob:
    """A one-worker TFJob of kfdist's runtime image running `python -c command`, with the PVC at
    /mnt/kfdist."""
    container = {"name": "tensorflow", "image": "ghcr.io/kfdist/kfdist-runtime:0.1.0",
                 "command": ["python", "-c", command],
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                 "volumeMounts": [{"name": "work", "mountPath": str(MOUNT)}]}
    body = {"apiVersion": TFJOB_V1.api_version, "kind": "TFJob",
            "metadata": {"name": name, "namespace": ns.name, "labels": dict(labels or {})},
            "spec": {"runPolicy": {}, "tfReplicaSpecs": {"Worker": {
                "replicas": 1, "restartPolicy": "Never", "template": {"spec": {
                    "containers": [container], "volumes": [
                        {"name": "work", "persistentVolumeClaim": {"claimName": CLAIM}}]}}}}}}
    return RenderedJob(TFJOB_V1, name, ns.name, body, {"training.kubeflow.org/job-name": name})


def _launch(job: RenderedJob, lines: List[str], **kwargs):
    return launch_and_wait(job, KubeApi.from_environment(), log=lines.append,
                           **{"timeout_seconds": 120, "owner": None, **kwargs})


def test_an_own_job_that_failed_in_an_earlier_attempt_is_replaced(bed_namespace, work_pvc,
                                                                  kfdist_images):
    ns = bed_namespace
    job = _tfjob(ns, "fails-once", FAILS_ONCE)
    first = json.loads(ns.kubectl("create", "-o", "json", "-f", "-",
                                  stdin=json.dumps(prepare_body(job, None))).stdout)
    wait_for(lambda: ("Failed", "TFJobFailed") in _conditions(ns.get("tfjob", job.name)),
             seconds=120, what="the earlier attempt's job to fail")
    lines: List[str] = []
    outcome = _launch(job, lines)
    assert not outcome.adopted and outcome.uid != first["metadata"]["uid"]
    assert outcome.reason == "TFJobSucceeded"
    assert any("from an earlier attempt failed: deleting it and starting again" in line
               for line in lines), lines
    assert any(line.endswith("trained") for line in lines), lines
    # Never suspended (no Kueue queue): never reported as queued.
    assert not any("is queued:" in line for line in lines), lines


def test_a_job_of_that_name_not_created_by_this_step_is_left_alone(bed_namespace, work_pvc,
                                                                   kfdist_images):
    ns = bed_namespace
    job = _tfjob(ns, "theirs", "print('theirs', flush=True)")
    before = json.loads(ns.kubectl("create", "-o", "json", "-f", "-",
                                   stdin=json.dumps(job.body)).stdout)
    with pytest.raises(JobNameConflictError) as raised:
        _launch(job, [])
    message = str(raised.value)
    assert "already exists and was not created by this step" in message
    assert f"no {SPEC_HASH_ANNOTATION} annotation" in message
    assert f"kubectl delete tfjobs.kubeflow.org theirs -n {ns.name}" in message
    after = ns.get("tfjob", "theirs")  # the operator runs it; the launcher never wrote to it
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert SPEC_HASH_ANNOTATION not in after["metadata"].get("annotations", {})


@pytest.fixture
def held_queue(node_bed, bed_namespace):
    """LocalQueue `team-queue` of a ClusterQueue that holds every workload; `release()` lets
    Kueue admit them."""
    name = run_on_the_bed.held_queue(node_bed, bed_namespace)
    release = lambda: node_bed.kubectl_run("patch", "clusterqueue", name, "--type=merge", "-p",
                                           '{"spec":{"stopPolicy":"None"}}')
    yield release
    node_bed.kubectl_run("delete", "clusterqueue", name, "--wait=false", check=False)


#: Held this long before admission; the timeout is shorter, and longer than the job's run.
HELD_SECONDS, TIMEOUT_SECONDS = 25.0, 20.0


@pytest.mark.parametrize("timeout_from", ["admission", "creation"])
def test_a_queued_jobs_timeout_counts_from_admission_only_when_asked(
        timeout_from, bed_namespace, work_pvc, kfdist_images, held_queue):
    ns = bed_namespace
    job = _tfjob(ns, "queued", "print('trained', flush=True)", {QUEUE_NAME_LABEL: "team-queue"})
    timer = threading.Timer(HELD_SECONDS, held_queue)
    timer.start()
    lines: List[str] = []
    try:
        if timeout_from == "admission":
            outcome = _launch(job, lines, timeout_seconds=TIMEOUT_SECONDS,
                              timeout_from="admission")
            assert outcome.reason == "TFJobSucceeded"
            assert any("was admitted after" in line for line in lines), lines
            # The Training Operator's own words for a job Kueue suspends and then resumes.
            assert any("Suspended (TFJobSuspended): TFJob queued is suspended." in line
                       for line in lines), lines
            [suspended] = [c for c in ns.get("tfjob", "queued")["status"]["conditions"]
                           if c["type"] == "Suspended"]
            assert (suspended["status"], suspended["reason"], suspended["message"]) == (
                "False", "TFJobResumed", "TFJob queued is resumed.")
        else:
            with pytest.raises(JobTimeoutError) as raised:
                _launch(job, lines, timeout_seconds=TIMEOUT_SECONDS)
            assert f"did not finish within {TIMEOUT_SECONDS:g} s and was deleted" in str(raised.value)
            assert ns.get("tfjob") == []
    finally:
        timer.cancel()
        timer.join()
    queued = [line for line in lines if "is queued: suspended until Kueue admits it" in line]
    assert queued, lines


def _trainjob(ns, **env) -> RenderedJob:
    """A TrainJob of two nodes on kfdist's TensorFlow runtime running a tiny node program
    (`sample_trainjob`, a body only: node 0 prints epochs; `SLEEP_<i>`, `EXIT_CODE_<i>` per node;
    `runtime=` another runtime)."""
    return sample_trainjob(namespace=ns.name, **env)


def test_a_failed_trainjob_names_trainers_reason_and_the_failed_pod(bed_namespace,
                                                                    kfdist_images):
    ns = bed_namespace
    with pytest.raises(TrainingFailedError) as raised:
        _launch(_trainjob(ns, SLEEP_0=60, EXIT_CODE_1=1), [])
    message = str(raised.value)
    assert (f"TrainJob {ns.name}/run-1-trainjob failed: Failed (FailedJobs): jobset failed due "
            "to one or more job failures") in message, message
    assert "Job node: 1 failed" in message, message
    assert "node-1: container node terminated: Error (exit code 1)" in message, message


def test_a_trainjob_past_its_timeout_is_deleted_with_its_jobset_and_pods(bed_namespace,
                                                                         kfdist_images):
    ns = bed_namespace
    with pytest.raises(JobTimeoutError) as raised:
        _launch(_trainjob(ns, SLEEP_0=120, SLEEP_1=120), [], timeout_seconds=15)
    assert "did not finish within 15 s and was deleted" in str(raised.value)
    wait_for(lambda: not ns.get("trainjob") and not ns.get("jobset") and not ns.get("pod"),
             seconds=90, what="the TrainJob, its JobSet and pods to go")


def test_a_trainjob_on_a_runtime_not_installed_is_refused_saying_how_to_install_it(
        bed_namespace):
    """Trainer's own validating webhook refuses it; kfdist adds what to install."""
    ns = bed_namespace
    with pytest.raises(AdmissionDeniedError) as raised:
        _launch(_trainjob(ns, runtime="kfdist-tensorflw"), [])
    message = str(raised.value)
    assert "kfdist-tensorflw" in message and "not found" in message, message
    assert message.endswith("install kfdist's Kubeflow Trainer runtimes: "
                            "kubectl apply --server-side -k manifests/runtimes"), message
    assert ns.get("trainjob") == []


def test_an_rbac_refusal_names_the_verb_the_resource_the_account_and_the_role(
        node_bed, bed_namespace, tmp_path, monkeypatch):
    """As the namespace's `default` service account, which no Role binds: the real API server
    refuses the create, and kfdist says which Role grants it."""
    from cluster import control_plane

    ns = bed_namespace
    token = node_bed.kubectl_run("create", "token", "default", f"--namespace={ns.name}",
                                 "--duration=10m").stdout.strip()
    kubeconfig = tmp_path / "default.kubeconfig"
    kubeconfig.write_text(control_plane.kubeconfig(
        node_bed.layout.api_url, node_bed.layout.pki / "ca.crt", {"token": token}, "default",
        ns.name))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with pytest.raises(PermissionDeniedError) as raised:
        _launch(_trainjob(ns), [])
    assert str(raised.value).startswith(
        f"RBAC denied create trainjobs.trainer.kubeflow.org in namespace {ns.name} for "
        f"system:serviceaccount:{ns.name}:default: apply manifests/base/rbac.yaml "
        "(Role kfdist-pipeline-runner)"), str(raised.value)
    assert ns.get("trainjob") == []
