"""The raw values of a table's columns over the eval split, read without TensorFlow.

The slices (`slices`) group the eval examples by these values; the labels read with
them (class ids, or a regression's numbers) must equal the predictions' labels.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import eval_predictions as ep
from kfdist.components.common.errors import InvalidInputError


def read_columns(meta: ds.DatasetMetadata, dataset_dir: str,
                 columns: Sequence[str], numbers: bool = False
                ) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """Reads the raw values of `columns` over the eval split, in shard order (`read_shards`)."""
    return read_shards(meta.feature, meta.shard_paths(dataset_dir, ep.EVAL_SPLIT),
                       meta.compression, columns, numbers=meta.is_regression)


def read_shards(feature_spec: ds.FeatureSpec, paths: Sequence[str], compression: Optional[str],
                columns: Sequence[str], numbers: bool = False
                ) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """Reads the raw values of `columns` from shards of kfdist examples, in order, without
    TensorFlow (`tfrecord_framing.read_records`, `example_proto.Example`).

    Args:
      feature_spec: The examples' feature spec.
      paths: The shard files.
      compression: None or `GZIP`.
      columns: Columns of `feature_spec` (numeric or string).
      numbers: Whether the labels are a regression's float numbers, not int64 class ids.

    Returns:
      Per column its values (strings as an object array, numbers as float32),
      and the examples' labels (int64; a regression's float32).

    Raises:
      InvalidInputError: Naming the shard and record when a record is not a kfdist example of
        the feature spec.
    """
    # Here, not at the top: the report and the run's summary import this module, and need
    # neither the descriptor pool nor CRC-32C.
    from kfdist.components.common import example_proto, tfrecord_framing

    numeric = list(feature_spec.columns or ())
    strings = list(feature_spec.categorical_columns or ())
    read = [(c, ds.CATEGORICAL_KEY, strings.index(c), "bytes_list") if c in strings
            else (c, ds.FEATURES_KEY, numeric.index(c), "float_list") for c in columns]
    widths = {ds.CATEGORICAL_KEY: len(strings), ds.FEATURES_KEY: int(np.prod(feature_spec.shape))}
    label_list = "float_list" if numbers else "int64_list"
    needs = ", ".join([f"one {label_list.split('_')[0]} {ds.LABEL_KEY!r}"] + [
        f"{widths[key]} {kind.split('_')[0]} {key!r}" for key, kind in
        dict((key, kind) for _, key, _, kind in read).items()])
    values = {c: [] for c in columns}
    labels = []
    for path in paths:
        for index, record in enumerate(tfrecord_framing.read_records(path, compression)):
            feature = example_proto.Example.FromString(record).features.feature
            label = (getattr(feature[ds.LABEL_KEY], label_list).value
                     if ds.LABEL_KEY in feature else ())
            row = {key: getattr(feature[key], kind).value if key in feature else ()
                   for _, key, _, kind in read}
            if len(label) != 1 or any(len(row[key]) != widths[key] for key in row):
                raise InvalidInputError(
                    f"record {index} of {path!r} is not an example of this dataset: its "
                    f"metadata says each example has {needs} values")
            labels.append(label[0])
            for column, key, position, _ in read:
                values[column].append(row[key][position])
    out = {}
    for column, key, _, _ in read:
        out[column] = (np.array([v.decode("utf-8") for v in values[column]], dtype=object)
                       if key == ds.CATEGORICAL_KEY else np.array(values[column], np.float32))
    return out, np.array(labels, dtype=np.float32 if numbers else np.int64)
