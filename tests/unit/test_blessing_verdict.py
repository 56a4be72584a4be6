"""The blessing rule (`evaluate_model.verdict`) and which exported version is the served one."""

import dataclasses
import inspect
import os

import pytest

from kfdist.components.common import serving_versions
from kfdist.components.common.errors import InvalidInputError
from kfdist.cli import build_parser
from kfdist.components.evaluate_model import runtime
from kfdist.components.evaluate_model.component import evaluate_model
from kfdist.components.evaluate_model.verdict import (
    ALLOW_CLASS_CHANGE, MIN_IMPROVEMENT, ServedModel, check_min_improvement, class_change, decide)
from kfdist.flag_wording import command_wording
from kfdist.local_run import RunOptions
from kfdist.pipelines.definition import common_params

SERVED = ServedModel(path="/srv/models/penguins/1700000000", version=1700000000, accuracy=0.94,
                     loss=0.2)


@pytest.mark.parametrize("accuracy, min_improvement, blessed", [
    (0.95, 0.0, True),     # better
    (0.94, 0.0, True),     # equal: not worse
    (0.93, 0.0, False),    # worse
    (0.95, 0.02, False),   # better, not by enough
    (0.96, 0.02, True),    # better by exactly enough (no float rounding against it)
    (0.93, -0.02, True),   # within the tolerance
    (0.91, -0.02, False),  # beyond it
    (0.91, -1.0, True),    # -1: the threshold alone
])
def test_the_new_model_must_not_be_worse_than_the_served_one(accuracy, min_improvement, blessed):
    verdict, reason = decide(accuracy, 0.9, served=SERVED, min_improvement=min_improvement,
                             allow_class_change=False)
    assert verdict is blessed
    assert "the served version 1700000000 scores 0.940" in reason
    assert f"change {accuracy - 0.94:+.3f}" in reason
    assert ("not good enough to replace it" in reason) is (not blessed)


def test_the_threshold_still_applies_when_the_served_model_is_worse():
    blessed, reason = decide(0.85, 0.9, served=dataclasses.replace(SERVED, accuracy=0.5),
                             allow_class_change=False)
    assert not blessed
    assert reason.startswith("accuracy 0.850 < threshold 0.900")


def test_without_a_served_model_the_threshold_alone_decides_and_says_so():
    assert decide(0.95, 0.9, served_root="/srv/models/penguins", allow_class_change=False) == (
        True, "accuracy 0.950 ≥ threshold 0.900; no served model under /srv/models/penguins "
              "to compare with")
    blessed, reason = decide(0.85, 0.9, allow_class_change=False)
    assert not blessed and reason.endswith("no served model (no export base given) to compare with")


def test_a_served_model_that_cannot_be_compared_is_named_and_the_threshold_decides():
    odd = ServedModel(path="gs://b/models/penguins/7", version=7,
                      mismatch="it takes 'image' uint8 [batch, 28, 28]; the dataset holds a table")
    blessed, reason = decide(0.95, 0.9, served=odd, allow_class_change=False)
    assert blessed
    assert ("the served model gs://b/models/penguins/7 could not be compared: it takes 'image' "
            "uint8 [batch, 28, 28]") in reason
    assert not decide(0.85, 0.9, served=odd, allow_class_change=False)[0]


def test_a_served_model_of_other_classes_is_replaced_only_when_allowed():
    change = class_change(["Adelie", "Chinstrap", "Gentoo"], ["Adelie", "Gentoo", "adelie"])
    assert change == ("it predicts 3 classes ['Adelie', 'Chinstrap', 'Gentoo']; the new model "
                      "predicts 3 (new: ['adelie']; gone: ['Chinstrap'])")
    assert class_change(["a", "b"], ["a", "b"]) is None and class_change(None, ["a"]) is None
    other = ServedModel(path="/srv/models/penguins/7", version=7, mismatch=change,
                        class_change=True)
    blessed, reason = decide(0.99, 0.9, served=other, allow_class_change=False)
    assert not blessed
    assert reason == (f"accuracy 0.990 ≥ threshold 0.900; the served model /srv/models/penguins/7 "
                      f"predicts other classes: {change}; a model with other classes replaces it "
                      "only with allow_class_change=True")
    assert decide(0.99, 0.9, served=other, allow_class_change=True)[0]
    assert not decide(0.85, 0.9, served=other, allow_class_change=True)[0]  # the threshold still


def test_allow_class_change_has_one_default_everywhere():
    component = inspect.signature(evaluate_model.python_func).parameters["allow_class_change"]
    pipeline = next(p for p in common_params("m") if p[0] == "allow_class_change")
    options = RunOptions(output_dir="out").allow_class_change
    flag = build_parser().parse_args(["run", "tabular", "--output", "out"]).allow_class_change
    evaluate = inspect.signature(runtime.evaluate).parameters["allow_class_change"].default
    assert (component.default, pipeline[2], options, flag, evaluate) == (ALLOW_CLASS_CHANGE,) * 5
    assert ALLOW_CLASS_CHANGE is False
    with pytest.raises(TypeError, match="allow_class_change"):  # no second default in the rule
        decide(0.95, 0.9)


@pytest.mark.parametrize("value", [-1.5, 1.01, "0.1", True, float("nan")])
def test_an_invalid_min_improvement_is_one_line_naming_it(value):
    with pytest.raises(InvalidInputError, match=r"min_improvement=.* expected a number in \[-1, 1\]"):
        check_min_improvement(value)


def test_min_improvement_has_one_default_everywhere():
    component = inspect.signature(evaluate_model.python_func).parameters["min_improvement"]
    pipeline = next(p for p in common_params("m") if p[0] == "min_improvement")
    assert component.default == pipeline[2] == MIN_IMPROVEMENT == 0.0


def test_the_served_version_is_the_highest_numeric_one(tmp_path):
    base = str(tmp_path)
    assert serving_versions.served_version(base, "m") is None
    for name in ("9", "10", ".tmp-11-x", "notes", "2"):
        os.makedirs(tmp_path / "m" / name)
    os.makedirs(tmp_path / "other" / "99")
    served = serving_versions.served_version(base + "/", "m")
    assert served == serving_versions.ServedVersion(10, f"{base}/m/10")
    assert serving_versions.existing_versions(serving_versions.model_root(base, "m")) == [2, 9, 10]


def test_the_reason_names_the_parameter_and_kfdist_run_says_the_flag_once():
    other = ServedModel(path="/srv/models/penguins/7", version=7, class_change=True,
                        mismatch="it predicts 3 classes ['a', 'b', 'c']; the new model predicts 2")
    refused = decide(0.99, 0.9, served=other, allow_class_change=False)[1]
    allowed = decide(0.99, 0.9, served=other, allow_class_change=True)[1]
    assert refused.endswith("replaces it only with allow_class_change=True")  # KFP, submit
    run = command_wording("run")
    assert run(refused).endswith("replaces it only with --allow-class-change")
    assert run(allowed).endswith("which --allow-class-change allows")
    assert "allow_class_change" not in run(refused) + run(allowed)
    anomalies = (
        "2 anomalies in the data against x (each on an `anomaly:` line above); fix the data, or "
        "go on with it with allow_anomalies=True")
    assert run(anomalies).endswith("go on with it with --allow-anomalies")
