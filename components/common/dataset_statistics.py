"""The statistics of a table dataset, stored beside its spec as `statistics.json`.

The shard step computes them over every row of the source (both splits) and
writes them into the dataset directory next to `metadata.json`; training
copies both into the Model artifact and the export step into the exported
version (`assets.extra/kfdist_dataset/`), so the next run can check new data
against what the served model was trained on (`shard_dataset/validation`).

Per column:

* `numeric`: rows, missing cells (NaN), minimum, maximum, mean and a
  histogram over `HISTOGRAM_BINS` equal-width bins between the minimum and the
  maximum (`histogram_edges`, `histogram_counts`: the bin counts, one more
  than the edges, the first and last for values below and above them, empty
  for the column's own data);
* `categorical`: rows, missing cells (`dataset_spec.MISSING_VALUES`), its
  distinct values (a missing cell is none of them) and the counts of the
  `MAX_VALUES` most frequent (`value_counts`; `other_count`: the rest), and
  whether it identifies rows.

Images are not described: their statistics are None.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Dict, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError

STATISTICS_FILE = "statistics.json"
#: In an exported model version: the spec (`metadata.json`) and the statistics of the dataset
#: the model was trained on.
EXPORTED_DATASET_DIR = "assets.extra/kfdist_dataset"
FORMAT_VERSION = "kfdist.statistics/v1"
NUMERIC, CATEGORICAL = "numeric", "categorical"
#: Equal-width bins of a numeric column's histogram.
HISTOGRAM_BINS = 10
#: Most values whose counts a categorical column records.
MAX_VALUES = 1_000


@dataclasses.dataclass(frozen=True)
class ColumnStatistics:
    """What one column of a table holds (see the module docstring).

    Attributes:
      name: The column.
      kind: `numeric` or `categorical`.
      rows: Rows of the dataset.
      missing: Rows where the cell is missing.
      minimum: Numeric: the smallest value (None: no value).
      maximum: Numeric: the largest value.
      mean: Numeric: the mean of the values.
      histogram_edges: Numeric: the bin edges, ascending.
      histogram_counts: Numeric: `len(histogram_edges) + 1` counts: below the first
        edge, each bin (the last one closed), above the last edge.
      distinct_values: Categorical: its distinct values.
      value_counts: Categorical: the most frequent values and their counts.
      other_count: Categorical: rows holding a value (not missing) not in `value_counts`.
      identifier: Categorical: the column identifies rows (left out of the dataset).
    """

    name: str
    kind: str
    rows: int
    missing: int
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    mean: Optional[float] = None
    histogram_edges: Optional[Tuple[float, ...]] = None
    histogram_counts: Optional[Tuple[int, ...]] = None
    distinct_values: Optional[int] = None
    value_counts: Optional[Dict[str, int]] = None
    other_count: Optional[int] = None
    identifier: bool = False

    @property
    def missing_share(self) -> float:
        """The share of rows whose cell is missing."""
        return self.missing / self.rows if self.rows else 0.0


@dataclasses.dataclass(frozen=True)
class DatasetStatistics:
    """The statistics of every feature column of a table dataset.

    Attributes:
      rows: Rows of the dataset (both splits).
      columns: Per feature column read from the source, numeric ones first, in
        file order (columns the user excluded are not read, so not here).
    """

    rows: int
    columns: Tuple[ColumnStatistics, ...]
    format_version: str = FORMAT_VERSION

    def by_name(self) -> Dict[str, ColumnStatistics]:
        """The columns by name."""
        return {c.name: c for c in self.columns}

    def to_json(self) -> str:
        """Serialises to the JSON stored in `statistics.json`."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DatasetStatistics":
        """Parses `statistics.json` text.

        Raises:
          InvalidInputError: If it is not kfdist statistics of a known format.
        """
        try:
            d = json.loads(text)
            if d.get("format_version") != FORMAT_VERSION:
                raise InvalidInputError(f"statistics format {d.get('format_version')!r} is not "
                                        f"{FORMAT_VERSION!r}; re-create the dataset with "
                                        "shard_dataset")
            columns = []
            for c in d["columns"]:
                for key in ("histogram_edges", "histogram_counts"):
                    if c.get(key) is not None:
                        c[key] = tuple(c[key])
                columns.append(ColumnStatistics(**c))
            return cls(rows=int(d["rows"]), columns=tuple(columns),
                       format_version=d["format_version"])
        except InvalidInputError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InvalidInputError(f"not kfdist dataset statistics: {type(e).__name__} {e}; "
                                    "re-create the dataset with shard_dataset") from None


def write_statistics(root: str, statistics: DatasetStatistics) -> None:
    """Writes `statistics.json` under local directory `root`."""
    with open(os.path.join(root, STATISTICS_FILE), "w") as f:
        f.write(statistics.to_json())


def load_statistics(root: str) -> Optional[DatasetStatistics]:
    """The statistics stored in local directory `root`; None when it holds none.

    Raises:
      InvalidInputError: If the file is there but is not kfdist statistics.
    """
    path = os.path.join(root, STATISTICS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        return DatasetStatistics.from_json(text)
    except InvalidInputError as e:
        raise InvalidInputError(f"{path!r}: {e}") from None


def copy_statistics(dataset_dir: str, target: str) -> bool:
    """Copies the statistics of the dataset at local `dataset_dir` to file `target` (a Model
    artifact's `dataset_statistics.json`, an exported version's copy), when it has any.

    Returns:
      Whether there were statistics to copy (a table's dataset has them).
    """
    path = os.path.join(dataset_dir, STATISTICS_FILE)
    if not os.path.isfile(path):
        return False
    shutil.copyfile(path, target)
    return True
