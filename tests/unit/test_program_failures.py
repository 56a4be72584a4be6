"""A per-replica value a failure prints whole is one line of a log, and a Keras 3 failure says
what it is and the fix in one line."""

import pytest

from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.common.value_folding import (
    MAX_FOLDED_LINES, ValueFolder, folded, folded_lines)
from kfdist.components.launch_program.program_failures import (
    KERAS3_HINT, FoldingLog, explained, hint_for)

VALUE = ["  0: <tf.Tensor: shape=(32, 8, 8), dtype=float32, numpy=",
         "array([[[0.05037099, 0.24721867, 0.485604  , ..., 0.93188924,",
         "         0.5028673 , 0.80291045],", "", "        ...,",
         "         0.14162207, 0.6869688 ]]], shape=(32, 8, 8), dtype=float32)>"]
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


def test_lines_past_the_limit_are_let_through_again():
    folder = ValueFolder()
    assert folder.feed(FAILURE[2]) == []
    emitted = [out for _ in range(MAX_FOLDED_LINES + 3) for out in folder.feed("1.0, 2.0,")]
    assert emitted[0].endswith(f"[{MAX_FOLDED_LINES - 1} line(s) of the value left out]")
    assert emitted[1:] == ["1.0, 2.0,"] * 4


def test_a_one_line_message_and_other_lines_pass_unchanged():
    lines = ["Attempt to convert a value (PerReplica:{0: 1}) with an unsupported type (x) to a "
             "Tensor.", "PerReplica:{", "epoch 1/2"]
    assert folded_lines(lines) == lines


def test_a_log_folds_per_replica_label():
    said = []
    log = FoldingLog(said.append)
    for line in FAILURE:
        log(f"[worker-0] {line}")
        log(f"[worker-1] {line}")
    log("kfdist: TFJob team-a/run")
    assert said[-3:] == ["[worker-0] exiting", "[worker-1] exiting", "kfdist: TFJob team-a/run"]
    assert said.count(f"[worker-1] {ONE_LINE}") == 1 and said.count(f"[worker-0] {ONE_LINE}") == 1
    assert not any("numpy=" in line or "0.05037099" in line for line in said)


def test_a_log_whose_stream_ends_within_a_value_says_it_when_flushed():
    said = []
    log = FoldingLog(said.append)
    for line in FAILURE[:5]:
        log(f"[chief-0] {line}")
    assert said == [f"[chief-0] {line}" for line in FAILURE[:2]]
    log.flush()
    assert said[-1] == ("[chief-0] ValueError: Attempt to convert a value (PerReplica:{ ... "
                        "[2 line(s) of the value left out]")


def test_a_keras3_failure_ends_with_what_it_is_and_the_fix():
    with pytest.raises(TrainingFailedError) as failed:
        with explained():
            raise TrainingFailedError("training failed: worker-0 ended with exit code 1: "
                                      + ONE_LINE)
    lines = str(failed.value).splitlines()
    assert lines[-1] == KERAS3_HINT and len(lines) == 2
    assert "tf-keras" in KERAS3_HINT and "TF_USE_LEGACY_KERAS=1" in KERAS3_HINT
    assert "--env TF_USE_LEGACY_KERAS=1" in KERAS3_HINT and "\n" not in KERAS3_HINT


def test_other_failures_are_left_as_they_are():
    error = TrainingFailedError("training failed: worker-0 ended with exit code 1: OOM")
    with pytest.raises(TrainingFailedError) as failed:
        with explained():
            raise error
    assert failed.value is error and hint_for(str(error)) is None
