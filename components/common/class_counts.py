"""The label of a dataset described: its classes, their examples per split, and warnings.

The shard step counts each class's examples in each split
(`DatasetMetadata.class_counts`); `label_record` turns them into the record the
Dataset artifact's metadata and the run's `summary.json` carry, and
`label_lines` into the lines the shard log and the console print. Classes
under `RARE_CLASS_SHARE` of the examples (and under half an even share, so
that a hundred even classes are not all rare) are warned of in one line
(accuracy barely shows how they are predicted), and so is a class missing from
a split: one the train split lacks cannot be learnt, one the held-out split
lacks is never scored.

The sums of per-split counts (`sum_counts`, `add_class_counts`, `class_totals`)
and the "first few, and how many more" of a long list (`listed`) are shared by
the shard step's label check and the evaluation's verdict.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from kfdist.components.common.dataset_spec import (
    PREDEFINED_SPLIT, REGRESSION, SPLITS, DatasetMetadata, display_class_names)
from kfdist.components.common.label_numbers import number_lines, number_record

#: A class with a smaller share of a dataset's examples is warned of.
RARE_CLASS_SHARE = 0.05
#: Items a line names (the rest are counted).
NAMED_CLASSES = 10
TRAIN, HELD_OUT = SPLITS


def listed(items: Iterable[str], limit: int = NAMED_CLASSES) -> str:
    """The first `limit` of `items` (already worded) joined by commas, and how many more.

    Args:
      items: What to name, in order.
      limit: How many to name.

    Returns:
      `a, b, c and 4 more` (no `and` when all are named).
    """
    items = list(items)
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def sum_counts(a: Sequence[int], b: Sequence[int]) -> List[int]:
    """Two lists of examples per class id added up (as long as the longer)."""
    return [(int(a[i]) if i < len(a) else 0) + (int(b[i]) if i < len(b) else 0)
            for i in range(max(len(a), len(b)))]


def add_class_counts(total: Sequence[int], labels) -> List[int]:
    """`total` (examples per class id) plus the examples of `labels` (a numpy array of ids)."""
    import numpy as np

    return sum_counts(total, np.bincount(labels).tolist() if len(labels) else ())


def class_totals(class_counts: Mapping[str, Sequence[int]]) -> List[int]:
    """The examples of each class id over every split (`DatasetMetadata.class_counts`)."""
    totals: List[int] = []
    for counts in class_counts.values():
        totals = sum_counts(totals, counts)
    return totals


def _warnings(classes: List[Dict[str, Any]], split: Optional[str]) -> List[str]:
    empty = [c["name"] for c in classes if not c[TRAIN] + c[HELD_OUT]]
    classes = [c for c in classes if c[TRAIN] + c[HELD_OUT]]
    total = sum(c[TRAIN] + c[HELD_OUT] for c in classes)
    # Rare: under RARE_CLASS_SHARE, and under half an even share (100 even classes are not rare).
    bound = min(RARE_CLASS_SHARE, 0.5 / max(len(classes), 1))
    rare = [(c["name"], c[TRAIN] + c[HELD_OUT]) for c in classes
            if (c[TRAIN] + c[HELD_OUT]) / total < bound]
    out = []
    if empty:
        out.append(f"the data has no example of class(es) {_names(empty)}: the model has an "
                   "output for each but cannot learn them")
    if rare:
        each = listed(f"{name!r} {n:,} ({n / total:.1%})" for name, n in rare)
        out.append(f"{len(rare)} class(es) under {bound:.1%} of the {total:,} examples: {each}"
                   "; accuracy barely shows how they are predicted: read their rows of "
                   "the confusion matrix")
    missing = {split: [c["name"] for c in classes if not c[split]] for split in (TRAIN, HELD_OUT)}
    if missing[TRAIN]:
        out.append(f"the train split has no example of class(es) {_names(missing[TRAIN])}: the "
                   "model cannot learn them")
    if missing[HELD_OUT]:
        remedy = ("add rows of it to the test files" if split == PREDEFINED_SPLIT
                  else "more data, or a larger eval_fraction")
        out.append(f"the held-out split has no example of class(es) {_names(missing[HELD_OUT])}: "
                   f"the evaluation never scores them ({remedy})")
    return out


def _names(names: List[str]) -> str:
    return listed(repr(n) for n in names)


def label_record(meta: DatasetMetadata) -> Optional[Dict[str, Any]]:
    """What a dataset's label holds: `column` (None: the source's folders name the classes),
    `classes` (per class, in class id order: its `name`, its `train` and `eval` examples) and
    `warnings` (one line each); None for a dataset written before classes were counted.
    A regression's label is a number: its record is `label_numbers.number_record`'s."""
    if meta.is_regression:
        return number_record(meta)
    if meta.class_counts is None:
        return None
    names = display_class_names(meta)
    counts = {split: list(meta.class_counts.get(split, ())) for split in (TRAIN, HELD_OUT)}
    classes = [{"name": name, **{split: int(counts[split][i]) if i < len(counts[split]) else 0
                                 for split in (TRAIN, HELD_OUT)}}
               for i, name in enumerate(names)]
    return {"column": meta.label_column, "classes": classes,
            "warnings": _warnings(classes, meta.split)}


def label_lines(record: Optional[Mapping[str, Any]]) -> List[str]:
    """The lines a person reads of a `label_record`: the classes with their examples, then
    each warning (`warning: ...`); none without a record. A regression's label: its range and
    mean (`label_numbers.number_lines`)."""
    if not record:
        return []
    if record.get("task") == REGRESSION:
        return number_lines(record)
    classes = [(c["name"], int(c[TRAIN] + c[HELD_OUT]))  # KFP keeps numbers as floats
               for c in record["classes"]]
    total = sum(n for _, n in classes) or 1
    shown = listed(f"{name!r} {n:,} ({n / total:.0%})" for name, n in classes)
    column = f"label {record['column']!r}" if record.get("column") else "label"
    return ([f"{column}: {len(classes)} classes: {shown}"]
            + [f"warning: {w}" for w in record.get("warnings") or ()])
