"""The `tfjob` backend end to end: the training step, a Kubernetes API, an operator, real replicas.

`runtime.train(..., backend="tfjob")` runs as in a KFP step: it reaches the API
through a kubeconfig (`KUBECONFIG`, nothing patched) that points at the test
API server (`kube_server`), whose `ProcessOperator` plays the Training Operator
and the kubelet: it turns the TFJob into pods and runs each replica's container
command (`python -m ...replica --work-uri`) as a local process with the operator's TF_CONFIG. The
step and the replicas meet at a `gs://` work location on the GCS emulator. (A retried step's
re-attach and Horovod's MPIJob run on the real control plane: tests/containers/.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import List

import pytest
import yaml

from fakes import crd_schema
from kfdist.components.common import model_artifact
from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TFJOB_V1
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for
from kfdist.components.train_distributed.job.work_location import replica_command
from fakes.kube_server.cluster_fixtures import BUCKET, NAMESPACE, PODS, Log, step_options as _options

pytestmark = pytest.mark.slow


USER_MODELS = textwrap.dedent('''
    import json, os
    import tensorflow as tf

    def fail_on_worker_1(input_shape, num_classes):
        task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
        if task.get("index") == 1:
            raise RuntimeError("boom in user model on worker 1")
        return tf.keras.Sequential([
            tf.keras.layers.Flatten(input_shape=input_shape),
            tf.keras.layers.Dense(num_classes, activation="softmax")])
''')


def _rendered(argv: List[str]) -> dict:
    """What `kfdist render` prints for `argv` and the test cluster's settings, parsed."""
    options = _options()
    argv = ["render", "--namespace", options["namespace"], "--task-name", options["task_name"],
            "--timeout-seconds", str(int(options["timeout_seconds"]))] + argv
    if "--run-id" not in argv:
        argv += ["--run-id", options["run_id"]]
    out = subprocess.run([sys.executable, "-m", "kfdist", *argv], capture_output=True, text=True,
                         check=True).stdout
    return yaml.safe_load(out)


def test_two_replicas_train_as_a_tfjob(cluster, dataset_uri, digits_dataset, tmp_path):
    model_dir = str(tmp_path / "model")
    log = Log()
    started = time.monotonic()
    report = runtime.train(digits_dataset, model_dir, backend="tfjob", workers=2, epochs=2,
                           batch_size_per_replica=32, **_options(), dataset_uri=dataset_uri,
                           log=log)
    print(f"\ntfjob step with 2 replicas: {time.monotonic() - started:.1f} s")

    # The Model artifact, assembled from what the replicas uploaded.
    assert os.path.isfile(os.path.join(model_dir, model_artifact.SAVED_MODEL_DIR, "saved_model.pb"))
    with open(os.path.join(model_dir, model_artifact.TRAINING_REPORT_FILE)) as f:
        written = json.load(f)
    assert written["backend"] == "tfjob" and written["workers"] == 2 and written["epochs"] == 2
    assert [r["task"] for r in written["replicas"]] == ["worker:0", "worker:1"]
    assert {r["num_replicas_in_sync"] for r in written["replicas"]} == {2}
    assert len({r["weights_sha256"] for r in written["replicas"]}) == 1
    assert report.replicas[0].weights_sha256 == written["replicas"][0]["weights_sha256"]
    assert {r["pid"] for r in written["replicas"]} == set(cluster.operator.pids())

    # The step streamed the chief's (worker 0's) own output, live from its pod log.
    assert log.starting("[worker-0] epoch 1/2: "), log.lines
    assert log.starting("[worker-0] replica worker:0 pid=")
    assert not log.starting("[worker-1]")  # only the chief's log is streamed
    assert any("succeeded: TFJob kubeflow-test/" in line for line in log.lines)

    # Exactly one TFJob, valid against the operator's CRD, running the replica program.
    name = job_name_for("run-123", "train-distributed")
    [post] = cluster.job_posts()
    body = post.body
    assert crd_schema.load_crd(crd_schema.crd_path_for(TFJOB_V1)).validate(body) == []
    # `kfdist render` with the same parameters prints this very object.
    assert _rendered(["--backend", "tfjob", "--workers", "2", "--epochs", "2",
                      "--batch-size", "32", "--dataset-uri", dataset_uri]) == body
    assert body["metadata"]["name"] == name and body["metadata"]["namespace"] == NAMESPACE
    assert body["spec"]["successPolicy"] == "AllWorkers"
    [worker] = body["spec"]["tfReplicaSpecs"].values()
    assert worker["replicas"] == 2
    [container] = worker["template"]["spec"]["containers"]
    assert container["name"] == "tensorflow"
    work_uri = f"gs://{BUCKET}/pipeline-root/run/shard/{name}"
    assert container["command"] == list(replica_command(work_uri))
    assert [j["metadata"]["name"] for j in cluster.jobs()] == [name]
    [job] = cluster.jobs()
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert cluster.wait_no_processes() == []


def test_failing_replica_fails_the_step_with_its_last_lines(cluster, dataset_uri, digits_dataset,
                                                            tmp_path, monkeypatch):
    user_models = tmp_path / "user_models"
    user_models.mkdir()
    (user_models / "kfdist_e2e_user_models.py").write_text(USER_MODELS)
    monkeypatch.syspath_prepend(str(user_models))  # the step imports it to validate the name
    cluster.operator.env["PYTHONPATH"] = str(user_models)  # the image would carry it
    log = Log()
    with pytest.raises(TrainingFailedError) as raised:
        runtime.train(digits_dataset, str(tmp_path / "model"), backend="tfjob", workers=2,
                      epochs=1, model_name="kfdist_e2e_user_models:fail_on_worker_1",
                      **_options(run_id="run-fail"), dataset_uri=dataset_uri, log=log)
    message = str(raised.value)
    name = job_name_for("run-fail", "train-distributed")
    # Exit code 1 is permanent under the default ExitCode policy: the operator fails the job.
    assert (f"TFJob {NAMESPACE}/{name} failed: Failed (TFJobFailed): job \"{name}\" is failing "
            f"because \"Worker\" replica(s) failed.") in message
    assert "worker-1: container tensorflow terminated: Error (exit code 1)" in message
    assert "Last lines of worker-1:" in message
    assert "replica worker:1 failed: RuntimeError: boom in user model on worker 1" in message
    assert cluster.wait_no_processes() == []
    assert len(cluster.jobs()) == 1  # a failed job is kept for inspection
    pods = {p["metadata"]["name"]: p for p in cluster.server.store.items(PODS, NAMESPACE)}
    assert list(pods) == [f"{name}-worker-1"]  # cleanPodPolicy Running: the running one went
    assert pods[f"{name}-worker-1"]["status"]["phase"] == "Failed"


@pytest.mark.parametrize("overrides, message", [
    ({"gpus_per_worker": -1}, "gpus must be an integer from 0"),
    ({"image": "ghcr.io/kfdist/kfdist-runtime"}, "image 'ghcr.io/kfdist/kfdist-runtime'"),
])
def test_bad_cluster_setting_fails_before_any_api_call(  # noqa: F811  (gcs_emulator fixture)
        cluster, dataset_uri, digits_dataset, tmp_path, overrides, message, gcs_emulator):
    name = job_name_for("run-bad", "train-distributed")
    with pytest.raises(InvalidInputError, match=message):
        runtime.train(digits_dataset, str(tmp_path / "model"), backend="tfjob", workers=2,
                      epochs=1, **_options(run_id="run-bad", **overrides),
                      dataset_uri=dataset_uri, log=Log())
    assert cluster.server.requests.all() == []
    assert gcs_emulator.list(f"gs://{BUCKET}/pipeline-root/run/shard/{name}/") == []
    assert cluster.operator.pids() == []


def test_parameter_server_trains_as_a_tfjob_with_an_evaluator(cluster, dataset_uri, digits_dataset,
                                                              tmp_path):
    """Chief + PS + 2 workers + evaluator: the chief decides success, the rest are ended."""
    model_dir = str(tmp_path / "model")
    log = Log()
    report = runtime.train(digits_dataset, model_dir, backend="tfjob", strategy="parameter_server",
                           workers=2, ps=1, evaluator=True, epochs=3, batch_size_per_replica=32,
                           **_options(run_id="run-ps"), dataset_uri=dataset_uri, log=log)
    [chief] = report.replicas
    assert chief.task == "chief:0"
    assert chief.variable_devices and all(d.startswith("/job:ps/") for d in chief.variable_devices)
    assert report.epochs == 3
    assert os.path.isfile(os.path.join(model_dir, model_artifact.SAVED_MODEL_DIR, "saved_model.pb"))
    assert not os.path.exists(os.path.join(model_dir, model_artifact.BACKUP_DIR))

    [post] = cluster.job_posts()
    body = post.body
    assert crd_schema.load_crd(crd_schema.crd_path_for(TFJOB_V1)).validate(body) == []
    # `kfdist render` with the same parameters prints this very object.
    assert _rendered(["--backend", "tfjob", "--strategy", "parameter_server", "--workers", "2",
                      "--ps", "1", "--evaluator", "--epochs", "3", "--batch-size", "32",
                      "--run-id", "run-ps", "--dataset-uri", dataset_uri]) == body
    assert sorted(body["spec"]["tfReplicaSpecs"]) == ["Chief", "Evaluator", "PS", "Worker"]
    assert "successPolicy" not in body["spec"]  # the chief decides
    assert body["spec"]["runPolicy"]["backoffLimit"] == 6
    assert {s["restartPolicy"] for s in body["spec"]["tfReplicaSpecs"].values()} == {"ExitCode"}
    # The evaluator followed the chief's checkpoints through the work location.
    evaluator_lines = cluster.operator.replica_output(body["metadata"]["name"], "evaluator-0")
    evaluations = [int(line.split("evaluation ")[1].split(":")[0]) for line in evaluator_lines
                   if line.startswith("evaluator: evaluation ")]
    assert evaluations and max(evaluations) <= 3, evaluator_lines[-10:]  # once per new checkpoint
    assert cluster.wait_no_processes() == []
