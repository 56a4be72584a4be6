"""What became of every column of a table, in words for the shard step's log and report.

Each feature column is numeric (standardised with the train split's mean and
deviation), categorical (a one-hot block over its vocabulary plus an unknown
slot) or left out, and why (`dataset_spec.ExcludedColumn`). A kept string
column with a distinct value in at least `NEAR_IDENTIFIER_SHARE` of the train
rows is nearly an identifier: it becomes a wide one-hot a model can memorise
the train rows by (held-out accuracy falls as epochs rise), so it is warned
about, naming `--exclude-columns`.
"""

from __future__ import annotations

from typing import List, Sequence

from kfdist.components.common.dataset_spec import FEATURES_KEY, DatasetMetadata

#: A kept string column with distinct values in this share of the train rows is nearly an
#: identifier (`categorical.IDENTIFIER_SHARE` and more: left out)...
NEAR_IDENTIFIER_SHARE = 0.5
#: ... once it has this many values.
NEAR_IDENTIFIER_MIN_VALUES = 20


def is_near_identifier(distinct_values: int, train_rows: int) -> bool:
    """Whether a kept string column with `distinct_values` in `train_rows` nearly identifies
    rows."""
    return (distinct_values >= NEAR_IDENTIFIER_MIN_VALUES
            and distinct_values >= NEAR_IDENTIFIER_SHARE * max(train_rows, 1))


def explain_columns(meta: DatasetMetadata, left_out: bool = True,
                    keep_columns: Sequence[str] = ()) -> List[str]:
    """One line per source column of a table: numeric, categorical or (with `left_out`) left
    out, and why; then a warning per string column that is nearly an identifier, but those
    the user keeps on purpose (`keep_columns`). Empty for images."""
    if meta.feature.key != FEATURES_KEY:
        return []
    pre, train_rows = meta.preprocessing, meta.splits["train"].num_examples
    lines = [f"column {name!r}: numeric, standardised (train mean {mean:.4g}, deviation {std:.4g})"
             for name, mean, std in zip(meta.feature.columns or (), pre.mean or (), pre.std or ())]
    warnings = []
    for name, vocabulary in zip(meta.feature.categorical_columns or (), pre.vocabularies or ()):
        lines.append(f"column {name!r}: categorical, {len(vocabulary):,} values in the train "
                     f"split, one-hot of {len(vocabulary) + 1:,} (with one for unknown values)")
        if name not in keep_columns and is_near_identifier(len(vocabulary), train_rows):
            warnings.append(
                f"warning: column {name!r} is nearly an identifier: {len(vocabulary):,} distinct "
                f"values in {train_rows:,} train rows ({len(vocabulary) / train_rows:.0%}) became "
                f"a {len(vocabulary) + 1:,}-way one-hot a model can memorise the train rows by "
                f"(held-out accuracy may fall as epochs rise); leave it out with "
                f"--exclude-columns {name}")
    lines += [c.describe() for c in meta.excluded_columns or () if left_out]
    return lines + warnings
