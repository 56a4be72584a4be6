"""The `trainjob` backend end to end: `kfdist run mnist` trains through a Kubeflow Trainer TrainJob.

The pipeline runs under kfp.local; its training step reaches the test API
server through `KUBECONFIG`. There, the test Trainer and JobSet controllers
(`kube_server.trainjob_run`) turn the TrainJob on kfdist's real runtime
(`manifests/runtimes`, installed in the cluster) into a JobSet, Jobs and pods,
and run each pod's container as a process. The replicas derive their
TF_CONFIG from their JobSet identity; the step and the replicas meet at a
`gs://` work location on the GCS emulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import List

import pytest

from fakes import crd_schema
from fakes.kube_server.cluster_fixtures import BUCKET, NAMESPACE
from fakes.kube_server.trainer_objects import JOBSETS, PODS, TRAINJOBS
from kfdist.components.train_distributed.job import tf_config
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1

pytestmark = pytest.mark.slow

#: strategy -> (replica layout the step defaults to, pods of the JobSet by replicated Job)
STRATEGIES = {
    "multi_worker_mirrored": ({"worker": 2}, {"node": 2}),
    "parameter_server": ({"chief": 1, "worker": 2, "ps": 1}, {"node": 4}),
    "horovod": ({}, {"node": 1, "launcher": 1}),
}


#: The pipeline's cluster default: the step finds Trainer and kfdist's runtime installed.
AUTO = "multi_worker_mirrored"


def _run_pipeline(strategy: str, out: str, pipeline: str = "mnist",
                  backend: str = "", extra: tuple = ()) -> dict:
    backend = backend or ("auto" if strategy == AUTO else "trainjob")
    argv = [sys.executable, "-m", "kfdist", "run", pipeline, "--backend", backend,
            "--strategy", strategy, "--namespace", NAMESPACE, "--output", out, *extra,
            "--work-uri", f"gs://{BUCKET}/{pipeline}-{backend}-{strategy.replace('_', '-')}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def _tf_configs(lines: List[str]) -> List[dict]:
    marker = "TF_CONFIG of pod "
    return [json.loads(line.split(": ", 1)[1]) for line in lines if line.startswith(marker)]


def _operator_layout(value: dict) -> dict:
    """`value` with every address replaced by the Training Operator's name for that replica."""
    cluster = {t: [f"job-{t}-{i}.ns.svc:2222" for i in range(len(a))]
               for t, a in value["cluster"].items()}
    return {"cluster": cluster, "task": value["task"], "environment": value["environment"]}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_mnist_pipeline_trains_through_a_trainjob(strategy, cluster, gcs_emulator, tmp_path):
    from google.api_core.exceptions import Conflict

    try:
        gcs_emulator.create_bucket(BUCKET)
    except Conflict:
        pass
    summary = _run_pipeline(strategy, str(tmp_path / "run"))
    assert summary["eval"]["accuracy"] >= 0.90
    assert summary["blessed"] is True
    assert summary["train"]["strategy"] == strategy
    with open(os.path.join(str(tmp_path / "run"), "logs", "train.log")) as f:
        step_log = f.read()
    if strategy == AUTO:
        assert ("backend auto: trainjob (Kubeflow Trainer and kfdist's runtime kfdist-tensorflow "
                "are installed)") in step_log
    assert "trainjob backend: TrainJob kubeflow-test/" in step_log

    # One TrainJob, exactly valid against Trainer v2.3.0's CRD, on kfdist's runtime.
    [post] = cluster.server.requests.matching(verb="create", resource="trainjobs")
    assert crd_schema.load_crd(crd_schema.crd_path_for(TRAINJOB_V1ALPHA1)).validate(post.body) == []
    name = post.body["metadata"]["name"]
    [trainjob] = cluster.server.store.items(TRAINJOBS, NAMESPACE)
    assert [(c["type"], c["reason"]) for c in trainjob["status"]["conditions"]] == [
        ("Complete", "AllJobsCompleted")]
    [jobset] = cluster.server.store.items(JOBSETS, NAMESPACE)
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == trainjob["metadata"]["uid"]
    counts, pods_by_job = STRATEGIES[strategy]
    replicated = {j["name"]: j["template"]["spec"]["parallelism"]
                  for j in jobset["spec"]["replicatedJobs"]}
    assert replicated == pods_by_job

    # Every TensorFlow replica derived the operator's TF_CONFIG for its place in the layout.
    configs = [c for i in range(pods_by_job["node"] if counts else 0)
               for c in _tf_configs(cluster.operator.replica_output(name, f"node-{i}"))]
    expected = tf_config.tf_configs({t: [""] * n for t, n in counts.items()})
    assert [(c["task"]["type"], c["task"]["index"]) for c in configs] == [
        (task.type, task.index) for task, _ in expected]
    for derived, (_, value) in zip(configs, expected):
        assert _operator_layout(derived) == _operator_layout(value)
    assert cluster.wait_no_processes() == []
    # Finished: only the pods of Jobs that ran to completion are left.
    left = [p for p in cluster.server.store.items(PODS, NAMESPACE)
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == name]
    assert left and {p["status"]["phase"] for p in left} == {"Succeeded"}


def test_a_trainer_v2_1_cluster_gets_pod_template_overrides(cluster, dataset_uri, digits_dataset,
                                                           tmp_path):
    """The step reads the installed TrainJob CRD: on Trainer v2.1 the pod settings travel in
    `podTemplateOverrides`, which the v2.1 controller applies, and training goes through."""
    from kfdist.components.train_distributed import runtime
    from fakes.kube_server.cluster_fixtures import Log, step_options
    from fakes.kube_server.trainer_objects import CRDS, install_trainer

    cluster.server.store.delete(CRDS + ("", TRAINJOB_V1ALPHA1.crd_name))
    install_trainer(cluster.server.store, trainjob_crd=crd_schema.TRAINJOB_V2_1_CRD, runtimes=False)
    log = Log()
    report = runtime.train(digits_dataset, str(tmp_path / "model"), backend="trainjob", workers=2,
                           epochs=2, batch_size_per_replica=32, node_selector={"pool": "cpu"},
                           **step_options(run_id="run-v21"), dataset_uri=dataset_uri, log=log)
    assert len({r.weights_sha256 for r in report.replicas}) == 1
    assert "trainjob backend: the cluster's TrainJob CRD has podTemplateOverrides" in log.lines
    [post] = cluster.server.requests.matching(verb="create", resource="trainjobs")
    assert "runtimePatches" not in post.body["spec"]
    [override] = post.body["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]
    assert override["spec"]["nodeSelector"] == {"pool": "cpu"}
    v2_1 = crd_schema.load_crd(crd_schema.crd_path(crd_schema.TRAINJOB_V2_1_CRD))
    assert v2_1.validate(post.body) == []
    pods = cluster.server.store.items(PODS, NAMESPACE)
    assert pods and all(p["spec"]["nodeSelector"] == {"pool": "cpu"} for p in pods)
    assert cluster.wait_no_processes() == []


@pytest.mark.parametrize("pipeline, backend, extra, bar", [
    ("tabular", "trainjob", (), 0.95), ("images", "tfjob", ("--epochs", "5"), 0.90)])
def test_the_tabular_and_images_pipelines_train_on_the_cluster(pipeline, backend, extra, bar,
                                                               cluster, gcs_emulator, tmp_path):
    """The same backends as `mnist`: the penguins through a TrainJob, the PNG digits through a
    TFJob, their datasets (string columns, decoded images) read by the replicas from gs://."""
    from google.api_core.exceptions import Conflict

    try:
        gcs_emulator.create_bucket(BUCKET)
    except Conflict:
        pass
    summary = _run_pipeline("multi_worker_mirrored", str(tmp_path / "run"), pipeline, backend,
                            extra)
    assert summary["pipeline"] == pipeline and summary["train"]["backend"] == backend
    assert summary["eval"]["accuracy"] >= bar and summary["blessed"] is True
    resource = {"trainjob": "trainjobs", "tfjob": "tfjobs"}[backend]
    assert len(cluster.server.requests.matching(verb="create", resource=resource)) == 1
    assert cluster.wait_no_processes() == []
