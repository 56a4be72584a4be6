"""The data check's measures and rules against cases worked out by hand.

L-infinity and Jensen-Shannon on small count tables, the histogram bins both
sides are counted in, and each anomaly rule on statistics written out here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kfdist.components.common.dataset_statistics import (
    CATEGORICAL, NUMERIC, ColumnStatistics, DatasetStatistics)
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import validation
from kfdist.components.shard_dataset.statistics import bin_counts, histogram_edges


def test_l_infinity_is_the_largest_share_difference():
    # shares a: 0.5 -> 0.75, b: 0.5 -> 0.25
    assert validation.l_infinity({"a": 2, "b": 2}, {"a": 3, "b": 1}) == pytest.approx(0.25)
    # a value only one side has counts with share 0 on the other
    assert validation.l_infinity({"a": 1}, {"b": 4}) == pytest.approx(1.0)
    assert validation.l_infinity({"a": 1, "b": 3}, {"a": 10, "b": 30}) == pytest.approx(0.0)
    assert validation.l_infinity({"a": 1, "b": 1, "c": 2}, {"a": 1, "b": 1}) == pytest.approx(0.5)
    assert validation.l_infinity({}, {"a": 1}) == 0.0


def _js_by_hand(p, q):
    p = [x / sum(p) for x in p]
    q = [x / sum(q) for x in q]
    m = [(a + b) / 2 for a, b in zip(p, q)]

    def kl(a, b):
        return sum(x * math.log2(x / y) for x, y in zip(a, b) if x > 0)

    return (kl(p, m) + kl(q, m)) / 2


def test_jensen_shannon_is_base_2_divergence():
    assert validation.jensen_shannon([5, 5], [5, 5]) == pytest.approx(0.0, abs=1e-12)
    assert validation.jensen_shannon([1, 0], [0, 1]) == pytest.approx(1.0)  # disjoint
    # p = (1/2, 1/2), q = (1, 0): 1/2 (KL(p||m) + KL(q||m)) with m = (3/4, 1/4)
    want = 0.5 * ((0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25))
                  + math.log2(1 / 0.75))
    assert validation.jensen_shannon([1, 1], [1, 0]) == pytest.approx(want)
    assert want == pytest.approx(0.3113, abs=1e-4)
    assert validation.jensen_shannon([3, 1, 0, 6], [1, 2, 7, 0]) == pytest.approx(
        _js_by_hand([3, 1, 0, 6], [1, 2, 7, 0]))
    assert validation.jensen_shannon([0, 0], [1, 2]) == 0.0


def test_values_are_binned_below_between_and_above_the_edges():
    counts = bin_counts(np.array([-1, 0, 0.5, 1, 1.5, 2, 3, np.nan]), (0.0, 1.0, 2.0))
    # below 0 | [0, 1) | [1, 2] (the last bin closed) | above 2; NaN nowhere
    assert counts.tolist() == [1, 2, 3, 1]
    assert histogram_edges(None, None) is None
    assert histogram_edges(0.0, 10.0) == tuple(float(v) for v in range(11))
    assert bin_counts(np.array([4.0, 4.0]), histogram_edges(4.0, 4.0)).tolist() == \
        [0] * 10 + [2, 0]  # a constant column: every value in the last bin


def numeric(name, edges=(0.0, 1.0, 2.0), counts=(0, 5, 5, 0), missing=0, rows=10):
    return ColumnStatistics(name=name, kind=NUMERIC, rows=rows, missing=missing, minimum=0.0,
                            maximum=2.0, mean=1.0, histogram_edges=edges,
                            histogram_counts=counts)


def categorical(name, values, missing=0, identifier=False, other=0):
    rows = sum(values.values()) + other
    return ColumnStatistics(name=name, kind=CATEGORICAL, rows=rows, missing=missing,
                            distinct_values=len(values), value_counts=values, other_count=other,
                            identifier=identifier)


def compare(reference_columns, current_columns, binned=None, **kwargs):
    return validation.compare(DatasetStatistics(10, tuple(reference_columns)),
                              DatasetStatistics(10, tuple(current_columns)),
                              reference_name="the reference", binned_at_reference=binned or {},
                              **kwargs)


def kinds(result):
    return sorted((a.column, a.kind) for a in result.anomalies)


def test_the_same_data_has_no_anomaly_and_no_drift():
    colour = {"red": 6, "blue": 4}
    result = compare([numeric("x"), categorical("colour", colour)],
                     [numeric("x"), categorical("colour", colour)], {"x": (0, 5, 5, 0)})
    assert result.anomalies == () and result.drifted == ()
    assert [(d.column, d.measure, d.value) for d in result.drifts] == [
        ("x", validation.JENSEN_SHANNON, pytest.approx(0.0, abs=1e-12)),
        ("colour", validation.L_INFINITY, 0.0)]


def test_each_schema_rule():
    result = compare(
        [numeric("gone"), numeric("turned"), categorical("colour", {"red": 6, "blue": 4}),
         numeric("holes", missing=1)],
        [numeric("turned_new"), categorical("turned", {"a": 10}),
         categorical("colour", {"red": 5, "blue": 3, "green": 2}), numeric("holes", missing=3)])
    assert kinds(result) == [("colour", "unseen values"), ("gone", "missing column"),
                             ("holes", "missing share"), ("turned", "kind changed"),
                             ("turned_new", "new column")]
    messages = {a.kind: a.message for a in result.anomalies}
    assert "'green' (2 rows)" in messages["unseen values"]
    assert messages["kind changed"] == ("column 'turned' was numeric and is now categorical "
                                        "(it holds strings)")
    assert "30% of its cells are missing, 10% in the reference" in messages["missing share"]


def test_a_missing_share_rise_at_the_threshold_is_no_anomaly():
    jump = int(validation.MISSING_SHARE_JUMP * 10)
    assert compare([numeric("x", missing=1)], [numeric("x", missing=1 + jump)]).anomalies == ()
    assert kinds(compare([numeric("x", missing=1)], [numeric("x", missing=2 + jump)])) == [
        ("x", "missing share")]


def test_excluded_columns_and_identifiers_are_not_anomalies():
    result = compare([numeric("x"), categorical("name", {"a": 1, "b": 1}, identifier=True)],
                     [categorical("name", {"c": 1, "d": 1}, identifier=True), numeric("y")],
                     excluded=("x",), reference_excluded=("y",))
    assert result.anomalies == () and result.drifts == ()
    assert sorted(result.notes) == [
        "column 'name': distribution not compared (it identifies rows)",
        "column 'x': not compared (excluded as requested)",
        "column 'y': not compared (excluded from the reference)"]


def test_drift_is_judged_against_the_thresholds():
    ref = [numeric("x", counts=(0, 10, 0, 0)), categorical("c", {"a": 8, "b": 2})]
    cur = [numeric("x", counts=(0, 5, 5, 0)), categorical("c", {"a": 5, "b": 5})]
    binned = {"x": (0, 5, 5, 0)}
    js = _js_by_hand([10, 0], [5, 5])
    result = compare(ref, cur, binned)
    assert {d.column: d.value for d in result.drifts} == {"x": pytest.approx(js),
                                                           "c": pytest.approx(0.3)}
    assert [d.column for d in result.drifted] == ["x", "c"]
    loose = compare(ref, cur, binned, categorical_threshold=0.31, numeric_threshold=js + 0.01)
    assert loose.drifted == () and loose.anomalies == ()


@pytest.mark.parametrize("bad", [-0.1, 1.5, "x"])
def test_thresholds_outside_0_to_1_are_refused(bad):
    with pytest.raises(InvalidInputError, match=r"numeric_drift_threshold=.* expected a number "
                                                r"from 0 to 1"):
        validation.check_thresholds(0.1, bad)
