"""More of the launcher's claims on the real control plane: a replica the kernel OOM-kills, a pod
held by a volume the kubelet cannot mount (explained by its events), a job that does not exist
told apart from a CRD that does not, a refused log stream that stops only the log, the step's
own pod found from its host name, a TrainJob re-attached by a retried step, and, on an API server
where no operator is installed, a job whose CRD is missing.

The launcher runs here with a namespace's ServiceAccount token (`KUBECONFIG`); the Training
Operator, Trainer and JobSet are the test bed's real ones, the pods the genuine node's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import List

import pytest

from cluster import control_plane
from cluster.fixture import sigkill_once
from containers.test_cluster_claims_on_the_bed import _step_pod
from containers.test_launcher_on_the_bed import _launch, _tfjob, work_pvc  # noqa: F401
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TFJOB_V1
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    CrdNotInstalledError, NotFoundError)
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import JobTimeoutError
from fakes.kube_server.sample_jobs import sample_mpijob, sample_tfjob, sample_trainjob

pytestmark = pytest.mark.slow


def test_an_oom_killed_replica_fails_the_job_naming_oomkilled_and_exit_code_137(
        bed_namespace, work_pvc, kfdist_images):
    """The worker asks for more memory than its limit: the container's cgroup kills it, the
    kubelet says OOMKilled, the Training Operator fails the job."""
    ns = bed_namespace
    job = _tfjob(ns, "greedy", "block = b'x' * (512 * 2**20); print('allocated', flush=True)")
    [container] = job.body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    container["resources"]["limits"] = {"memory": "128Mi"}
    lines: List[str] = []
    with pytest.raises(TrainingFailedError) as raised:
        _launch(job, lines)
    message = str(raised.value)
    assert f"TFJob {ns.name}/greedy has failed because 1 Worker replica(s) failed." in message, \
        message
    assert "worker-0: container tensorflow terminated: OOMKilled (exit code 137)" in message, \
        message
    assert "[worker-0] container tensorflow terminated: OOMKilled (exit code 137)" in lines, lines
    assert "allocated" not in "\n".join(lines)
    assert [j["metadata"]["name"] for j in ns.get("tfjob")] == ["greedy"]  # kept for a look


def test_a_pod_held_by_a_missing_config_map_is_explained_by_the_kubelets_event(
        bed_namespace, work_pvc, kfdist_images):
    """No condition of the pod says why it waits (its containers are ContainerCreating): the
    FailedMount event the kubelet records does, and the timeout's message names it."""
    ns = bed_namespace
    job = _tfjob(ns, "unmounted", "print('never', flush=True)")
    template = job.body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    template["volumes"].append({"name": "settings", "configMap": {"name": "train-settings"}})
    template["containers"][0]["volumeMounts"].append({"name": "settings",
                                                     "mountPath": "/etc/settings"})
    with pytest.raises(JobTimeoutError) as raised:
        _launch(job, [], timeout_seconds=10)
    message = str(raised.value)
    assert ('worker-0: FailedMount: MountVolume.SetUp failed for volume "settings" : configmap '
            '"train-settings" not found') in message, message
    assert ns.get("tfjob") == []


def test_a_job_that_does_not_exist_is_not_mistaken_for_a_crd_that_does_not(bed_namespace):
    with pytest.raises(NotFoundError) as raised:
        KubeApi.from_environment().get_job(TFJOB_V1, bed_namespace.name, "no-such-job")
    assert not isinstance(raised.value, CrdNotInstalledError)
    assert 'tfjobs.kubeflow.org "no-such-job" not found' in str(raised.value)


def _account_without_logs(bed, ns, tmp_path) -> str:
    """A ServiceAccount bound to the pipeline runner's Role less `pods/log`; its kubeconfig."""
    [role] = [r for r in ns.get("role") if r["metadata"]["name"] == "kfdist-pipeline-runner"]
    rules = [dict(rule, resources=[r for r in rule["resources"] if r != "pods/log"])
             for rule in role["rules"]]
    ns.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "no-logs"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "no-logs"}, "rules": [r for r in rules if r["resources"]]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "no-logs"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "no-logs"},
         "subjects": [{"kind": "ServiceAccount", "name": "no-logs", "namespace": ns.name}]}]}))
    token = ns.kubectl("create", "token", "no-logs", "--duration=10m").stdout.strip()
    kubeconfig = tmp_path / "no-logs.kubeconfig"
    kubeconfig.write_text(control_plane.kubeconfig(bed.layout.api_url, bed.layout.pki / "ca.crt",
                                                   {"token": token}, "no-logs", ns.name))
    return str(kubeconfig)


def test_a_refused_log_stream_stops_only_the_log_and_the_job_still_succeeds(
        node_bed, bed_namespace, work_pvc, kfdist_images, tmp_path, monkeypatch):
    ns = bed_namespace
    monkeypatch.setenv("KUBECONFIG", _account_without_logs(node_bed, ns, tmp_path))
    lines: List[str] = []
    outcome = _launch(_tfjob(ns, "unlogged", "print('trained', flush=True)"), lines)
    assert outcome.reason == "TFJobSucceeded"
    [stopped] = [line for line in lines if line.startswith("[logs] stopped following")]
    assert f"RBAC denied get pods/log in namespace {ns.name}" in stopped, stopped
    assert "system:serviceaccount:" + ns.name + ":no-logs" in stopped, stopped
    assert not any(line.endswith("trained") for line in lines)


def test_the_steps_own_pod_is_found_from_kfps_variables_or_its_host_name(bed_namespace,
                                                                         monkeypatch):
    ns = bed_namespace
    pod = _step_pod(ns, "step-own")
    api = KubeApi.from_environment()
    monkeypatch.setenv("KFP_POD_NAMESPACE", ns.name)
    monkeypatch.setenv("KFP_POD_NAME", "step-own")
    monkeypatch.setenv("KFP_POD_UID", "uid-from-kfp")
    assert api.read_own_pod_reference() == OwnerRef(ns.name, "step-own", "uid-from-kfp")
    monkeypatch.delenv("KFP_POD_NAME")
    monkeypatch.delenv("KFP_POD_UID")
    monkeypatch.setenv("HOSTNAME", "step-own")  # a pod's host name is its name
    assert api.read_own_pod_reference() == OwnerRef(ns.name, "step-own", pod["metadata"]["uid"])
    monkeypatch.setenv("HOSTNAME", "not-a-pod")  # outside a pod: no owner, no error
    assert api.read_own_pod_reference() is None


#: A launcher in its own process (killed by the test): launches the job given as JSON with the
#: owner given, printing the log lines.
LAUNCHER = """
import json, sys
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    TRAINJOB_V1ALPHA1, RenderedJob)
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import launch_and_wait
job, owner = json.loads(sys.argv[1]), json.loads(sys.argv[2])
launch_and_wait(RenderedJob(TRAINJOB_V1ALPHA1, job["name"], job["namespace"], job["body"],
                            job["selector"]), KubeApi.from_environment(), timeout_seconds=300,
                log=lambda line: print(line, flush=True), owner=OwnerRef(**owner))
"""


def test_a_retried_step_reattaches_to_its_trainjob_as_a_second_owner(bed_namespace,
                                                                     kfdist_images):
    """The first launcher is SIGKILLed while node 0 trains (nothing cleans up); the retry finds
    its TrainJob, adopts it and adds its own pod as the second owner, and follows it to the end:
    the garbage collector keeps the TrainJob while either attempt's pod exists."""
    ns = bed_namespace
    attempts = [_step_pod(ns, f"trainjob-attempt-{n}") for n in (1, 2)]
    owners = [OwnerRef(ns.name, p["metadata"]["name"], p["metadata"]["uid"]) for p in attempts]
    job = sample_trainjob(namespace=ns.name, SLEEP_0=20)
    first = subprocess.Popen(
        [sys.executable, "-u", "-c", LAUNCHER, json.dumps(
            {"name": job.name, "namespace": job.namespace, "body": job.body,
             "selector": job.log_pod_selector}), json.dumps(dataclasses.asdict(owners[0]))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    sigkill_once(first, lambda seen: any(line.startswith("[node-0] epoch 1/2") for line in seen),
                 180)
    [created] = ns.get("trainjob")
    lines: List[str] = []
    outcome = _launch(job, lines, owner=owners[1])
    assert outcome.adopted and outcome.uid == created["metadata"]["uid"]
    assert outcome.reason == "AllJobsCompleted"
    assert any(line.startswith(f"Re-attaching to TrainJob {ns.name}/{job.name}")
               for line in lines), lines
    assert "[node-0] saved model" in lines, lines
    [after] = ns.get("trainjob")
    assert [o["uid"] for o in after["metadata"]["ownerReferences"]] == [
        o.uid for o in owners]


@pytest.mark.parametrize("sample, operator_name", [
    (sample_tfjob, "Kubeflow Training Operator"), (sample_mpijob, "MPI Operator"),
    (sample_trainjob, "Kubeflow Trainer")])
def test_a_missing_crd_says_which_operator_to_install(bare_namespace, sample, operator_name):
    """On an API server where no operator is installed: the create's 404 is the CRD's absence,
    said with what to install, and nothing is deleted after it."""
    job = sample(namespace=bare_namespace.name)
    with pytest.raises(CrdNotInstalledError) as raised:
        _launch(job, [])
    message = str(raised.value)
    crd = f"{job.kind.crd_name}, {job.kind.api_version}"
    assert f"the {job.kind.kind} CRD ({crd}) is not installed" in message, message
    assert f"install the {operator_name}" in message and job.kind.install_hint in message, message
    calls = [(c["verb"], c["objectRef"]["resource"], c["responseStatus"]["code"])
             for c in bare_namespace.api_calls()]
    assert (("create", job.kind.plural, 404)) in calls, calls
    assert not [c for c in calls if c[0] == "delete"], calls
