"""The training step's failures and refusals on the real control plane: a user's model that fails
on one replica (in the user's own image) fails the step with that replica's last lines, and bad
settings are refused before the step makes any call to the API server (its audit log shows
none from the step's ServiceAccount).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from cluster import node
from containers import test_run_on_the_bed as run_on_the_bed
from containers.test_cluster_claims_on_the_bed import EXAMPLES, _step_options
from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.components.launch_program import program_step
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

pytestmark = pytest.mark.slow
work_pvc = run_on_the_bed.work_pvc  # the PVC at /mnt/kfdist, as there

#: A user's model module: the model fails to build on worker 1.
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
USER_IMAGE = "localhost/kfdist-test/user-models:1"


@pytest.fixture(scope="module")
def user_image(node_bed, kfdist_images, tmp_path_factory) -> str:
    """The user's image: kfdist's runtime image with their model module on its PYTHONPATH, run
    as root, as many images are (kfdist gives an image it did not build no user of its own); in
    the node's containerd, as a registry would give it."""
    context = tmp_path_factory.mktemp("user-image")
    (context / "kfdist_e2e_user_models.py").write_text(USER_MODELS)
    (context / "Containerfile").write_text(
        f"FROM {kfdist_images['runtime']}\nCOPY kfdist_e2e_user_models.py /opt/user/\n"
        "ENV PYTHONPATH=/opt/user\nUSER 0\n")
    built = subprocess.run(["podman", "build", "-t", USER_IMAGE, str(context)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    node.import_images(node_bed, [USER_IMAGE])
    return USER_IMAGE


def test_a_user_model_failing_on_one_replica_fails_the_step_with_its_last_lines(
        bed_namespace, work_pvc, user_image, digits_dataset, tmp_path, monkeypatch):
    ns = bed_namespace
    monkeypatch.syspath_prepend(str(tmp_path))  # the step imports the model to check its name
    (tmp_path / "kfdist_e2e_user_models.py").write_text(USER_MODELS)
    log = []
    with pytest.raises(TrainingFailedError) as raised:
        runtime.train(digits_dataset, str(tmp_path / "model"), log=log.append, epochs=1,
                      model_name="kfdist_e2e_user_models:fail_on_worker_1",
                      **_step_options(ns, "run-fail", image=user_image))
    message = str(raised.value)
    name = job_name_for("run-fail", "train-distributed")
    # Exit code 1 is permanent under the default ExitCode policy: the operator fails the job.
    assert (f"TFJob {ns.name}/{name} failed: Failed (TFJobFailed): job \"{name}\" is failing "
            "because \"Worker\" replica(s) failed.") in message, message
    assert "worker-1: container tensorflow terminated: Error (exit code 1)" in message, message
    assert "Last lines of worker-1:" in message, message
    assert "replica worker:1 failed: RuntimeError: boom in user model on worker 1" in message
    assert "Traceback" not in message.split("Last lines of worker-1:")[0]
    [job] = ns.get("tfjob")  # a failed job is kept for inspection
    pods = {p["metadata"]["name"]: p for p in ns.get("pod")}
    assert f"{name}-worker-1" in pods and pods[f"{name}-worker-1"]["status"]["phase"] == "Failed"


@pytest.mark.parametrize("overrides, message", [
    ({"gpus_per_worker": -1}, "gpus must be an integer from 0"),
    ({"image": "ghcr.io/kfdist/kfdist-runtime"}, "image 'ghcr.io/kfdist/kfdist-runtime'"),
])
def test_a_bad_cluster_setting_is_refused_before_any_api_call(
        bed_namespace, work_pvc, digits_dataset, tmp_path, overrides, message):
    ns = bed_namespace
    with pytest.raises(InvalidInputError, match=message):
        runtime.train(digits_dataset, str(tmp_path / "model"), log=lambda line: None, epochs=1,
                      **_step_options(ns, "run-bad", **overrides))
    assert ns.api_calls() == []
    assert not (work_pvc / "run-bad").exists()  # nothing staged either


def test_a_program_backend_that_does_not_run_the_framework_is_refused_before_any_api_call(
        bed_namespace, work_pvc, digits_dataset, tmp_path):
    ns = bed_namespace
    options = ClusterOptions(namespace=ns.name, run_id="run-bad-program",
                             task_name="train-program", pvc_name=run_on_the_bed.CLAIM,
                             work_uri=f"{run_on_the_bed.MOUNT}/run-bad-program")
    command = [sys.executable, f"{EXAMPLES}/keras_fit_backup_restore.py", "--epochs", "1"]
    with pytest.raises(InvalidInputError, match="backend 'pytorchjob' does not run framework "
                                                "'tensorflow'; valid: \\['local', 'tfjob', "
                                                "'trainjob'\\]"):
        program_step.train_program(digits_dataset, str(tmp_path / "m"), command,
                                   framework="tensorflow", workers=2, backend="pytorchjob",
                                   cluster=options)
    assert ns.api_calls() == []
    assert not (work_pvc / "run-bad-program").exists()
