"""The label checked against the reference's: a class gained or lost is an anomaly.

A model predicts the classes it was trained on. New data whose label holds a
value the reference never had (a class spelled another way, a new one), or
lacks a class the reference had, would train a model with other outputs than
the served one's: both are anomalies of the data check (`validation`), which
fail the shard step unless `allow_anomalies`; the evaluation then never lets a
model with other classes replace the served one unasked (`evaluate_model/verdict`).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from kfdist.components.common.class_counts import class_totals, listed
from kfdist.components.common.dataset_spec import (
    CLASSIFICATION, REGRESSION, DatasetMetadata, display_class_names)
from kfdist.components.shard_dataset.validation import NAMED_VALUES, Anomaly

NEW_CLASS, MISSING_CLASS, TASK_CHANGED = "new class", "missing class", "task changed"
_TASK_WORDS = {REGRESSION: "a number (regression)", CLASSIFICATION: "classes (classification)"}


def dataset_classes(meta: DatasetMetadata) -> Dict[str, Optional[int]]:
    """A dataset's classes and their examples (both splits); a class id without an example
    is no class of the data.

    A dataset written before classes were counted (`class_counts` None) gives its class
    names with None examples: they may name ids that never occurred (its ids ran 0..max of
    its labels), so only the new data's classes it lacks are anomalies
    (`label_anomalies`); without names either, its classes are not known: empty.
    """
    if meta.class_counts is None:
        return dict.fromkeys(meta.class_names or ())
    names = display_class_names(meta)
    totals = class_totals(meta.class_counts)
    return {name: n for name, n in zip(names, totals) if n}


def scanned_classes(class_names: Optional[Sequence[str]],
                    class_counts: Mapping[str, Sequence[int]]) -> Dict[str, int]:
    """The classes a scan found and their examples (both splits), by name.

    Args:
      class_names: The source's class names (index = class id); None: the ids are the names.
      class_counts: Per split, the examples of each class id (`scan.ScanResult.class_counts`).
    """
    totals = class_totals(class_counts)
    names = class_names or [str(i) for i in range(len(totals))]
    return {names[i]: n for i, n in enumerate(totals) if n}


def task_anomalies(reference_task: str, task: str,
                   label_column: Optional[str]) -> List[Anomaly]:
    """The label's anomaly when it is a number where the reference's was classes, or the
    reverse: a model of one predicts other outputs than a model of the other."""
    if reference_task == task:
        return []
    column = label_column or "label"
    return [Anomaly(column, TASK_CHANGED, (
        f"label {column!r}: the reference's is {_TASK_WORDS[reference_task]}, this data's is "
        f"{_TASK_WORDS[task]}; a model of one does not replace a model of the other (task "
        "chooses what the label is)"))]


def _named(values: Sequence[str], counts: Mapping[str, Optional[int]]) -> str:
    return listed((f"{v!r}" + (f" ({counts[v]:,} rows)" if counts.get(v) is not None else "")
                   for v in values), NAMED_VALUES)


def label_anomalies(reference: Mapping[str, Optional[int]], current: Mapping[str, int],
                    label_column: Optional[str]) -> List[Anomaly]:
    """The label's anomalies: classes the reference never had, and classes it had that the
    new data lacks.

    Args:
      reference: The reference's classes and their examples (`dataset_classes`); a class
        with None examples (a reference written before classes were counted) is not
        looked for in the new data, nor is any when the reference names none.
      current: The new data's (`scanned_classes`).
      label_column: The label's name in messages (None: the source's folders).
    """
    column = label_column or "label"
    if not reference:
        return []  # an old reference of numeric labels: its classes are not known
    known = sorted(reference)
    new = sorted(current, key=lambda v: (-current[v], v))
    new = [v for v in new if v not in reference]
    gone = [v for v in known if v not in current and reference[v] is not None]
    out = []
    if new:
        rows = sum(current[v] for v in new)
        out.append(Anomaly(column, NEW_CLASS, (
            f"label {column!r}: {len(new)} class(es) the reference never had, in {rows:,} of "
            f"{sum(current.values()):,} rows: {_named(new, current)}; the reference's classes "
            f"are {_named(known, {})}")))
    if gone:
        out.append(Anomaly(column, MISSING_CLASS, (
            f"label {column!r}: {len(gone)} class(es) of the reference missing from this data: "
            f"{_named(gone, reference)} in the reference; a model trained on it cannot predict "
            "them")))
    return out
