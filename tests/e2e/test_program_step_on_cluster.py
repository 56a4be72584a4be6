"""The `train_program` step with a cluster backend: the Keras example as the pipeline's training
step, run as a TrainJob by the test cluster's operators (as a TFJob it runs on the real control
plane: tests/containers/test_cluster_claims_on_the_bed.py).

The step runs as in a KFP pod: it reaches the API through `KUBECONFIG`, the dataset artifact is on
`gs://` (the GCS emulator) and the job's model and checkpoints go beside it. With `stage`, kfdist's
entry gives the program local directories (TensorFlow's own gs:// client cannot reach the
emulator). The model artifact the step completes is then evaluated as the pipeline's next step
evaluates it.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from fakes.kube_server.cluster_fixtures import NAMESPACE, step_options
from kfdist.components.common import model_artifact as ma
from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.evaluate_model.runtime import evaluate
from kfdist.components.launch_program import program_step
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

pytestmark = pytest.mark.slow

EXAMPLE = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                                       "examples", "keras_fit_backup_restore.py"))
COMMAND = [sys.executable, EXAMPLE, "--epochs", "3"]


def _options(run_id: str) -> ClusterOptions:
    return ClusterOptions(**{**step_options(run_id), "task_name": "train-program"})


@pytest.mark.parametrize("backend", ["trainjob"])
def test_the_keras_example_trains_as_a_cluster_job_and_its_model_is_evaluated(
        backend, cluster, dataset_uri, digits_dataset, tmp_path):
    model_dir = tmp_path / "model"
    lines = []
    report = program_step.train_program(
        digits_dataset, str(model_dir), COMMAND, framework="tensorflow", workers=2,
        backend=backend, stage=True, cluster=_options(f"run-{backend}"), dataset_uri=dataset_uri,
        log=lines.append)
    printed = "\n".join(lines)
    assert report.backend == backend and report.replicas == 2 and report.serving_model
    assert ("kfdist: TFJob " if backend == "tfjob" else "kfdist: TrainJob ") + NAMESPACE in printed
    assert "Epoch 3/3" in printed  # the leader's log, streamed through the step
    assert sorted(os.listdir(model_dir)) == [ma.DATASET_METADATA_FILE, "program_report.json",
                                             ma.SAVED_MODEL_DIR, ma.SERVING_MODEL_DIR]
    evaluated = evaluate(str(model_dir), digits_dataset, accuracy_threshold=0.8, log=lambda _: None)
    assert evaluated.blessed, evaluated.reason  # as the pipeline's evaluate step takes it
    # The job's directories lie beside the dataset, named after the run and task: a retried
    # step's job re-attaches to them.
    job_name = job_name_for(f"run-{backend}", "train-program")
    assert storage.exists(f"{dataset_uri.rsplit('/', 1)[0]}/{job_name}/model/saved_model.pb")
    with open(model_dir / "program_report.json") as f:
        assert json.load(f)["backend"] == backend


def test_a_backend_that_does_not_run_the_framework_is_refused_before_the_cluster(
        cluster, dataset_uri, digits_dataset, tmp_path):
    with pytest.raises(InvalidInputError, match="backend 'pytorchjob' does not run framework "
                                                "'tensorflow'; valid: \\['local', 'tfjob', "
                                                "'trainjob'\\]"):
        program_step.train_program(digits_dataset, str(tmp_path / "m"), COMMAND,
                                   framework="tensorflow", workers=2, backend="pytorchjob",
                                   cluster=_options("run-bad"), dataset_uri=dataset_uri)
    assert not cluster.server.store.items(("kubeflow.org", "v1", "pytorchjobs"), NAMESPACE)
