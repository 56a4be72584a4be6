"""The `tfjob` backend end to end: the training step, a Kubernetes API, an operator, real replicas.

`runtime.train(..., backend="tfjob")` runs as in a KFP step: it reaches the API
through a kubeconfig (`KUBECONFIG`, nothing patched) that points at the test
API server (`kube_server`), whose `ProcessOperator` plays the Training Operator
and the kubelet: it turns the TFJob into pods and runs each replica's container
command (`python -m ...replica --work-uri`) as a local process with the operator's TF_CONFIG. The
step and the replicas meet at a `gs://` work location on the GCS emulator. What remains here: a
user model failing on one replica, and bad settings refused before any API call (the fake's
request log shows none was made). Two replicas, a parameter-server job with an evaluator, `kfdist
render` against the created object, and a retried step run on the real control plane:
tests/containers/.
"""

from __future__ import annotations

import textwrap

import pytest

from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for
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
