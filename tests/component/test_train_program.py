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
    # worker-0's exit decides the job (as the operator decides it) and ends worker-1: it waits
    # until worker-1 has printed, so both lines are there however the two are scheduled.
    printed = tmp_path / "worker-1-printed"
    program = ("import json, os, pathlib, time\n"
               "print(os.environ['KFDIST_DATA_DIR'], flush=True)\n"
               f"printed = pathlib.Path({str(printed)!r})\n"
               "if json.loads(os.environ['TF_CONFIG'])['task']['index'] == 1:\n"
               "    printed.touch()\n"
               "while not printed.exists():\n"
               "    time.sleep(0.05)\n")
    lines = []
    with pytest.raises(TrainingFailedError, match="wrote no SavedModel into KFDIST_MODEL_DIR"):
        program_step.train_program(
            digits_dataset, str(tmp_path / "model"), [sys.executable, "-c", program],
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


def test_a_program_whose_model_does_not_take_the_dataset_fails_the_step_saying_why(
        digits_dataset, tmp_path):
    program = tmp_path / "other_data.py"
    program.write_text(
        "import os\n"
        "os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')\n"
        "import tensorflow as tf\n"
        "from kfdist import program\n"
        "model = tf.keras.Sequential([tf.keras.Input(shape=(4,)),\n"
        "                             tf.keras.layers.Dense(10, activation='softmax')])\n"
        "model.save(program.model_dir())\n")
    model_dir = tmp_path / "model"
    with pytest.raises(TrainingFailedError) as failed:
        program_step.train_program(digits_dataset, str(model_dir), [sys.executable, str(program)],
                                   framework="tensorflow", workers=1, log=lambda line: None)
    assert str(failed.value).endswith(
        "cannot be evaluated: the model does not fit the dataset: it takes 'input_1' float32 "
        "[batch, 4]; the dataset holds 28x28 images, fed to the model as float32 "
        "[batch, 28, 28] (its recorded preprocessing applied); build the model's input from "
        "the dataset (kfdist.program.input_shape() is (28, 28))")
    assert not (model_dir / "serving_model").exists()
