"""A per-replica value a failure prints whole is one line of a log, without hiding any other line,
and a failure kfdist knows says what it is and the fix in one line, in its caller's words."""

import pytest

from kfdist.components.common.errors import TrainingFailedError
from kfdist import images
from kfdist.components.common.value_folding import ValueFolder, folded, folded_lines
from kfdist.components.launch_program import program_failures as pf
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import JobTimeoutError

VALUE = ["  0: <tf.Tensor: shape=(32, 8, 8), dtype=float32, numpy=",
         "array([[[0.05037099, 0.24721867, 0.485604  , ..., 0.93188924,",
         "         0.5028673 , 0.80291045],", "", "        ...,",
         "         0.14162207, 0.6869688 ]]], shape=(32, 8, 8), dtype=float32)>"]
KERAS3_FRAMES = [
    "Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
    '  File "/venv/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 122, '
    "in error_handler", "    raise e.with_traceback(filtered_tb) from None"]
FAILURE = (["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
            "ValueError: Attempt to convert a value (PerReplica:{"] + VALUE +
           ["}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>)"
            " to a Tensor.", "exiting"])
ONE_LINE = ("ValueError: Attempt to convert a value (PerReplica:{ ... [6 line(s) of the value left "
            "out] ... }) with an unsupported type (<class 'tensorflow.python.distribute.values."
            "PerReplica'>) to a Tensor.")


def test_the_value_is_folded_into_the_messages_one_line():
    assert folded_lines(FAILURE) == FAILURE[:2] + [ONE_LINE, "exiting"]


def test_each_source_folds_its_own_value_when_their_lines_interleave():
    pairs = [(source, line) for line in FAILURE for source in (0, 1)]
    out = list(folded(pairs))
    assert [line for source, line in out if source == 0] == FAILURE[:2] + [ONE_LINE, "exiting"]
    assert [line for source, line in out if source == 1] == FAILURE[:2] + [ONE_LINE, "exiting"]


def test_a_value_whose_source_ends_within_it_is_still_said():
    assert folded_lines(FAILURE[:5]) == FAILURE[:2] + [
        "ValueError: Attempt to convert a value (PerReplica:{ ... "
        "[2 line(s) of the value left out]"]


def test_a_log_line_inside_the_value_is_kept_and_ends_the_fold():
    log_line = "W0000 00:00:1795849390.071020    5922 dataset.cc:997] Input of GeneratorDatasetOp"
    lines = FAILURE[:5] + [log_line] + FAILURE[5:]
    out = folded_lines(lines)
    assert log_line in out
    assert out[2] == ("ValueError: Attempt to convert a value (PerReplica:{ ... "
                      "[2 line(s) of the value left out]") and out[3] == log_line


def test_a_cut_off_value_lets_the_next_traceback_through():
    cut = FAILURE[2:5] + ["Traceback (most recent call last):", "RuntimeError: OOM"]
    out = folded_lines(cut)
    assert out[1:] == ["Traceback (most recent call last):", "RuntimeError: OOM"], out
    assert out[0].startswith("ValueError: Attempt to convert a value (PerReplica:{ ... [2 line")


def test_a_folder_says_an_open_value_when_its_source_ends():
    folder = ValueFolder()
    assert [out for line in FAILURE[:5] for out in folder.feed(line, "run-1")] == FAILURE[:2]
    assert folder.feed("epoch 1/2", "run-2") == ["epoch 1/2"]  # another run of the pod
    assert folder.flush("run-1").endswith("[2 line(s) of the value left out]")
    assert folder.flush("run-1") is None and folder.flush_all() == []


def test_a_one_line_message_and_other_lines_pass_unchanged():
    lines = ["Attempt to convert a value (PerReplica:{0: 1}) with an unsupported type (x) to a "
             "Tensor.", "PerReplica:{", "epoch 1/2"]
    assert folded_lines(lines) == lines


def _failed(message, wording=pf.STEP_LOCAL, error_type=TrainingFailedError):
    with pytest.raises(TrainingFailedError) as failed:
        with pf.explained(wording):
            raise error_type(message)
    return failed.value


def test_a_keras3_failure_ends_with_what_it_is_and_the_fix():
    error = _failed("training failed: worker-0 ended with exit code 1: Last lines:\n"
                    + "\n".join(KERAS3_FRAMES + [ONE_LINE]), pf.LAUNCH_LOCAL)
    lines = str(error).splitlines()
    assert lines[-1] == pf.keras3_hint(pf.LAUNCH_LOCAL) and len(lines) == len(KERAS3_FRAMES) + 3
    assert "tf-keras" in lines[-1] and "TF_USE_LEGACY_KERAS=1" in lines[-1]
    assert lines[-1].endswith("or with kfdist launch --env TF_USE_LEGACY_KERAS=1")


def test_the_step_names_no_env_flag_it_does_not_have():
    for wording in (pf.STEP_LOCAL, pf.STEP_CLUSTER):
        hint = str(_failed("\n".join(KERAS3_FRAMES + [ONE_LINE]), wording)).splitlines()[-1]
        assert hint == pf.keras3_hint(wording) and "--env" not in hint, hint
        assert 'os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")' in hint


def test_a_custom_loop_without_reduce_is_not_called_keras3():
    # A custom loop's `loss = strategy.run(step, ...)` used as a tensor: no Keras frame.
    message = "\n".join(['Traceback (most recent call last):',
                         '  File "loop.py", line 30, in <module>',
                         '    total += float(loss)', ONE_LINE])
    hint = str(_failed(message, pf.LAUNCH_LOCAL)).splitlines()[-1]
    assert hint == pf.per_replica_hint(pf.LAUNCH_LOCAL)
    assert hint.startswith("a per-replica value was used as a tensor")
    assert "strategy.reduce" in hint and "Keras 3" in hint
    assert not hint.startswith("the program failed in Keras 3")


@pytest.mark.parametrize("wording, says", [
    (pf.LAUNCH_CLUSTER, "--image an image built FROM"),
    (pf.STEP_CLUSTER, "the step's image parameter (kfdist run program's --image) an image built"),
    (pf.LAUNCH_LOCAL, "run the program with the Python kfdist is installed in"),
])
def test_a_replica_without_kfdist_is_told_where_kfdist_is_needed(wording, says):
    message = ("training failed: worker-0 ended with exit code 1: ModuleNotFoundError: No module "
               "named 'kfdist'")
    hint = str(_failed(message, wording)).splitlines()[-1]
    assert says in hint and "\n" not in hint, hint
    assert (images.image("runtime") in hint) == (wording.image is not None)


def test_a_timeout_keeps_its_type_when_explained():
    error = _failed("job did not finish: " + ONE_LINE, pf.LAUNCH_CLUSTER, JobTimeoutError)
    assert type(error) is JobTimeoutError


def test_other_failures_are_left_as_they_are():
    error = TrainingFailedError("training failed: worker-0 ended with exit code 1: OOM")
    with pytest.raises(TrainingFailedError) as failed:
        with pf.explained():
            raise error
    assert failed.value is error and pf.hint_for(str(error)) is None
