"""A table's label values as classes or as numbers: their names, their ids, and labels refused.

The task (`task`) decides whether the label is a class or a number to predict:
`auto` (the default) makes a label of more than `MAX_NUMBER_CLASSES` distinct
numbers a number (`regression`) and any other a class, as below (a few numbers
that are not whole are refused, naming `task=regression`: a stray `0.5` among
`0`/`1` is more often a mistake than a quantity); `regression` makes any numeric
label a number and refuses text, naming a text value and its line;
`classification` keeps the classes as below and refuses a quantity.

For classification, the distinct values of the label column decide what the classes are:

* every value a whole number (`0`, `7`, `-1`, `2.0`): the numbers are the
  classes. When they are exactly 0..k-1 they are their own ids and the dataset
  records no names (as for MNIST's digits); otherwise (`3, 5, 9`, `1, 2, 3`,
  `-1, 1`) they become ids 0..k-1 in ascending order, named by the numbers
  (`"3"`, `"5"`, `"9"`): a model has one output per class that occurs, never
  `max + 1`;
* no value a number: each value is a class name, ids in sorted order;
* numbers and text together (one `benign` among `0`/`1`) are refused, naming
  a value of each kind and its line, as a feature column mixing them is: a
  guess would make the odd value a class of its own;
* numbers that are not whole, or more than `MAX_NUMBER_CLASSES` distinct
  numbers, are a quantity (a weight, a price), not classes: as classes they are
  refused in one line naming the column and a number that is not whole, or how
  many distinct numbers it holds, rather than trained as thousands of classes of
  a few rows each.

A row whose label is missing (empty, or `NA` or another of `MISSING_VALUES`, as the
column statistics count a missing value) is refused while the columns are read
(`csv_columns.missing_label`), naming its line: no label value is a missing one.

Whole numbers are read as written (`int`), never through a float, which would
merge those past 2**53 and name them otherwise than their text.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from kfdist.components.common.class_counts import listed
from kfdist.components.common.dataset_spec import (
    AUTO_TASK, CLASSIFICATION, REGRESSION, TASKS)
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.csv_columns import is_number, where
from kfdist.components.shard_dataset.scan import SourceChangedError

#: Most distinct numbers a label column may hold as classes; more is a quantity to predict.
MAX_NUMBER_CLASSES = 100
#: A label's number: an int when whole.
Number = Union[int, float]
#: Values of the rarer kind a refusal names.
_NAMED = 3
#: `row_blocks(path, num_columns)`: `(first line, rows)` blocks of a CSV file, as
#: `csv_reader` reads them.
RowBlocks = Callable[[str, int], Iterator[Tuple[int, List[List[str]]]]]


@dataclasses.dataclass(frozen=True)
class LabelClasses:
    """The classes of a label column.

    Attributes:
      names: The class names, index = class id; None when the labels are the ids 0..k-1
        themselves.
      ids: Each distinct (stripped) label value of the source and its class id; for
        `regression`, its number.
      task: `classification` or `regression`.
    """

    names: Optional[Tuple[str, ...]]
    ids: Dict[str, Number]
    task: str = CLASSIFICATION


def check_task(task: str) -> None:
    """Raises `InvalidInputError` unless `task` is one of `TASKS`."""
    require(task in TASKS, f"task={task!r} is not a task; expected one of {list(TASKS)}")


#: A whole number written as one (`7`, `-12`, `+3`): read exactly, never through a float,
#: which merges the whole numbers past 2**53.
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _number(text: str) -> Optional[Number]:
    """The number a label holds (an int when it is whole: `7`, `2.0`), None for text."""
    if not is_number(text):
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    value = float(text)
    return int(value) if value.is_integer() else value


def number_name(value: Number) -> str:
    """How a numeric class is named: `3` for 3 (or 3.0), `2.5` for 2.5."""
    return str(value) if isinstance(value, int) else repr(value)


def _first_rows(paths: Sequence[str], num_columns: int, label_index: int,
                row_blocks: RowBlocks) -> Tuple[Tuple[str, str], Tuple[str, str]]:
    """The first label that is a number and the first that is not, as `(where, value)`."""
    found: Dict[bool, Tuple[str, str]] = {}
    for path in paths:
        for first_line, rows in row_blocks(path, num_columns):
            for offset, row in enumerate(rows):
                value = row[label_index].strip()
                kind = is_number(value)
                if kind not in found:
                    found[kind] = (where(path, first_line + offset), value)
                    if len(found) == 2:
                        return found[True], found[False]
    raise SourceChangedError(
        "the label column's files changed while they were read: a value seen when they were "
        "first read is gone; shard a copy that does not change meanwhile")


def _refuse_mixed(labels: Sequence[str], numbers: Dict[str, Number], label_column: str,
                  first: Tuple[Tuple[str, str], Tuple[str, str]]) -> None:
    (n_where, number), (t_where, text) = first
    texts = sorted(v for v in labels if v not in numbers)
    named = listed((repr(v) for v in texts), _NAMED)
    raise InvalidInputError(
        f"label column {label_column!r} mixes numbers and text: {number!r} at {n_where} is a "
        f"number but {text!r} at {t_where} is not (text labels: {named}); a label "
        "column holds class numbers or class names, not both: fix those rows, or name "
        "another column with label_column")


def _numeric_classes(numbers: Dict[str, Number], label_column: str, task: str) -> LabelClasses:
    distinct = sorted(set(numbers.values()))
    if task == REGRESSION or (task == AUTO_TASK and len(distinct) > MAX_NUMBER_CLASSES):
        return LabelClasses(names=None, ids={t: float(v) for t, v in numbers.items()},
                            task=REGRESSION)
    odd = next((v for v in distinct if not isinstance(v, int)), None)
    if len(distinct) > MAX_NUMBER_CLASSES or odd is not None:
        why = (f"numbers that are not whole (e.g. {odd!r})" if odd is not None else
               f"{len(distinct):,} distinct numbers (classes are at most {MAX_NUMBER_CLASSES})")
        ids = "" if odd is not None else " (more class ids than that: write them as names)"
        raise InvalidInputError(
            f"label column {label_column!r} holds {why}: a quantity to predict, not classes; "
            "predict the number with task=regression, or bin the values into classes in a "
            f"column of their own{ids}, or name another column with label_column")
    if distinct == list(range(len(distinct))):
        return LabelClasses(names=None, ids={t: int(v) for t, v in numbers.items()})
    index = {v: i for i, v in enumerate(distinct)}
    return LabelClasses(names=tuple(number_name(v) for v in distinct),
                        ids={t: index[v] for t, v in numbers.items()})


def _refuse_text(labels: Sequence[str], label_column: str,
                 first: Tuple[str, str]) -> None:
    t_where, text = first
    named = listed((repr(v) for v in sorted(labels)), _NAMED)
    raise InvalidInputError(
        f"label column {label_column!r} holds text ({text!r} at {t_where}; its values: "
        f"{named}), but task=regression predicts a number: a text label is a class, predict it "
        "with task=classification (or auto), or name a numeric column with label_column")


def _first_text(paths: Sequence[str], num_columns: int, label_index: int,
                row_blocks: RowBlocks) -> Tuple[str, str]:
    """Where the first label that is not a number is, and its value."""
    for path in paths:
        for first_line, rows in row_blocks(path, num_columns):
            for offset, row in enumerate(rows):
                value = row[label_index].strip()
                if not is_number(value):
                    return where(path, first_line + offset), value
    raise SourceChangedError(
        "the label column's files changed while they were read: a value seen when they were "
        "first read is gone; shard a copy that does not change meanwhile")


def label_classes(labels: Sequence[str], label_column: str, *, paths: Sequence[str],
                  num_columns: int, label_index: int, row_blocks: RowBlocks,
                  task: str = AUTO_TASK) -> LabelClasses:
    """The classes (or, for a regression, the numbers) of a label column's distinct values
    (see the module docstring).

    Args:
      labels: The column's distinct stripped values (none missing).
      label_column: Its name, for messages.
      paths: The CSV files read, to name the lines of a column that mixes numbers and text.
      num_columns: Their columns.
      label_index: The label's position among them.
      row_blocks: Reads a file's rows (`csv_reader`).
      task: `auto`, `classification` or `regression` (`TASKS`).

    Raises:
      InvalidInputError: On numbers mixed with text; for `classification`, numbers that
        are not whole or more than `MAX_NUMBER_CLASSES` distinct numbers; for
        `regression`, text.
      SourceChangedError: If the files no longer hold both kinds when their lines are sought.
    """
    check_task(task)
    numbers = {v: n for v in labels if (n := _number(v)) is not None}
    if not numbers and task == REGRESSION:
        _refuse_text(labels, label_column,
                     _first_text(paths, num_columns, label_index, row_blocks))
    if not numbers:
        return LabelClasses(names=tuple(sorted(labels)),
                            ids={name: i for i, name in enumerate(sorted(labels))})
    if len(numbers) < len(labels):
        _refuse_mixed(labels, numbers, label_column,
                      _first_rows(paths, num_columns, label_index, row_blocks))
    return _numeric_classes(numbers, label_column, task)
