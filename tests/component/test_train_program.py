"""`train_program`'s runtime: it completes the Model artifact only from a program that saved a
SavedModel, refuses a dataset that is not a kfdist dataset, and the `program` pipeline takes its
training parameters from the component."""

import inspect
import sys

import pytest

from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.components.launch_program import program_step


def test_a_program_that_saves_no_saved_model_fails_the_step_saying_where(digits_dataset,
                                                                         tmp_path):
    lines = []
    with pytest.raises(TrainingFailedError, match="wrote no SavedModel into KFDIST_MODEL_DIR"):
        program_step.train_program(
            digits_dataset, str(tmp_path / "model"),
            [sys.executable, "-c", "import os; print(os.environ['KFDIST_DATA_DIR'])"],
            framework="tensorflow", workers=2, log=lines.append)
    assert f"[worker-0] {digits_dataset}" in lines and f"[worker-1] {digits_dataset}" in lines


def test_a_directory_that_is_not_a_kfdist_dataset_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(InvalidInputError, match="is not a kfdist dataset"):
        program_step.train_program(str(tmp_path), str(tmp_path / "model"), ["true"],
                                   framework="tensorflow", workers=1)
    assert not (tmp_path / "model").exists()


def test_the_program_pipeline_takes_the_component_parameters():
    from kfdist.components.launch_program.component import train_program
    from kfdist.pipelines.program import program_pipeline

    pipeline = program_pipeline.pipeline_func
    params = inspect.signature(pipeline).parameters
    step = inspect.signature(train_program.python_func).parameters
    assert params["command"].default is inspect.Parameter.empty
    for name in ("framework", "workers", "ps", "restart_policy", "backoff_limit"):
        assert params[name].default == step[name].default
    assert "accuracy_threshold" in params and "export_base" in params
