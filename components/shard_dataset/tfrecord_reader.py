"""TFRecord sources of `tf.train.Example`s, plain or gzip (detected per file).

The schema is taken from the first record: `label_column` must be a single
int64. Without `image_shape`, every other feature must be numeric (int64 or
float, fixed length); they are concatenated in sorted key order into the
canonical float32 `features`. With `image_shape`, the one bytes feature is
taken as raw uint8 pixels of that shape (numeric features are then ignored).
Records that break the schema are reported while streaming, before any shard
is written.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import FEATURES_KEY, IMAGE_KEY, FeatureSpec
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.source import (
    BATCH_SIZE, ExampleBatch, ReaderOptions, Source, is_gzip_file)

TFRECORD_PATTERN = re.compile(r"\.(tfrecords?|tfr)(-\d+-of-\d+)?(\.gz)?$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class NumericField:
    """A fixed-length numeric feature of the source examples."""

    key: str
    dtype: str  # "int64" or "float32"
    length: int


@dataclasses.dataclass(frozen=True)
class ExampleSchema:
    """The features read from every source example.

    Attributes:
      label_key: The int64 label feature.
      numeric: Numeric input features, in key order (empty for images).
      image_key: The bytes feature holding raw pixels, or None.
    """

    label_key: str
    numeric: Tuple[NumericField, ...]
    image_key: Optional[str] = None


def is_tfrecord_file(path: str) -> bool:
    """Returns whether `path` is named like a TFRecord file."""
    return TFRECORD_PATTERN.search(os.path.basename(path)) is not None


def compression_of(path: str) -> str:
    """`GZIP` if the file is gzip-compressed, else `` (TFRecordDataset's argument)."""
    return "GZIP" if is_gzip_file(path) else ""


def _first_record(files: Sequence[str]) -> Tuple[str, bytes]:
    import tensorflow as tf

    for path in files:
        try:
            for record in tf.data.TFRecordDataset(path, compression_of(path)).take(1):
                return path, record.numpy()
        except tf.errors.OpError as e:
            raise InvalidInputError(f"cannot read TFRecord file {path!r}: {e.message}") from e
    raise InvalidInputError(f"the TFRecord files {list(files)[:5]} hold no records")


def infer_schema(path: str, record: bytes, options: ReaderOptions) -> ExampleSchema:
    """Derives the schema from one serialized `tf.train.Example`.

    Raises:
      InvalidInputError: If the record is not an Example, lacks an int64
        label, or its features do not fit the requested canonical form.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    try:
        features = tf.train.Example.FromString(record).features.feature
    except DecodeError as e:
        raise InvalidInputError(f"{path!r} does not hold tf.train.Example records: {e}") from e
    label = options.label_column
    kinds = {key: f.WhichOneof("kind") for key, f in features.items()}
    require(label in kinds, f"the examples in {path!r} have no label feature {label!r}; "
                            f"their features are {sorted(kinds)}")
    require(kinds[label] == "int64_list" and len(features[label].int64_list.value) == 1,
            f"label feature {label!r} in {path!r} is a {kinds[label]} of "
            f"{_length(features[label])} values; it must be one int64 class id")
    inputs = {k: kind for k, kind in kinds.items() if k != label}
    byte_keys = sorted(k for k, kind in inputs.items() if kind == "bytes_list")
    if options.image_shape is not None:
        require(len(byte_keys) == 1,
                f"image_shape is set, so the examples in {path!r} need exactly one bytes "
                f"feature holding raw pixels; they have {byte_keys or 'none'}")
        return ExampleSchema(label_key=label, numeric=(), image_key=byte_keys[0])
    require(not byte_keys,
            f"bytes features {byte_keys} in {path!r} are not numeric; pass image_shape "
            "if one holds raw uint8 images, or drop them")
    numeric = tuple(
        NumericField(key=k, dtype="int64" if inputs[k] == "int64_list" else "float32",
                     length=_length(features[k]))
        for k in sorted(inputs))
    require(bool(numeric) and all(f.length > 0 for f in numeric),
            f"the examples in {path!r} need at least one non-empty numeric feature "
            f"besides {label!r}; they have {sorted(kinds)}")
    return ExampleSchema(label_key=label, numeric=numeric)


def _length(feature) -> int:
    kind = feature.WhichOneof("kind")
    return len(getattr(feature, kind).value) if kind else 0


def column_names(schema: ExampleSchema) -> Tuple[str, ...]:
    """Names of the `features` vector's entries: `key`, or `key[i]` for longer features."""
    names: List[str] = []
    for field in schema.numeric:
        names.extend([field.key] if field.length == 1 else
                     [f"{field.key}[{i}]" for i in range(field.length)])
    return tuple(names)


def _parse_spec(schema: ExampleSchema) -> Dict[str, object]:
    import tensorflow as tf

    spec: Dict[str, object] = {schema.label_key: tf.io.FixedLenFeature([], tf.int64)}
    if schema.image_key is not None:
        spec[schema.image_key] = tf.io.FixedLenFeature([], tf.string)
    for field in schema.numeric:
        dtype = tf.int64 if field.dtype == "int64" else tf.float32
        spec[field.key] = tf.io.FixedLenFeature([field.length], dtype)
    return spec


def _to_batch(parsed: Dict[str, np.ndarray], schema: ExampleSchema,
              image_shape: Optional[Tuple[int, ...]], path: str) -> ExampleBatch:
    labels = parsed[schema.label_key].astype(np.int64)
    if schema.image_key is not None and image_shape is not None:
        values = parsed[schema.image_key]
        size = int(np.prod(image_shape))
        bad = [len(v) for v in values if len(v) != size]
        require(not bad, f"a {schema.image_key!r} value in {path!r} has {bad[0] if bad else 0} "
                         f"bytes; image_shape {list(image_shape)} needs {size}")
        inputs = np.frombuffer(b"".join(values), np.uint8).reshape((len(values), *image_shape))
    else:
        inputs = np.concatenate([parsed[f.key].astype(np.float32).reshape(len(labels), -1)
                                 for f in schema.numeric], axis=1)
        require(bool(np.isfinite(inputs).all()),
                f"a numeric feature in {path!r} is NaN or infinite; inputs must be finite")
    return ExampleBatch(inputs=inputs, labels=labels, origin=path)


def _read_file_batches(path: str, schema: ExampleSchema,
                       image_shape: Optional[Tuple[int, ...]]) -> Iterator[ExampleBatch]:
    import tensorflow as tf

    spec = _parse_spec(schema)
    dataset = (tf.data.TFRecordDataset(path, compression_of(path)).batch(BATCH_SIZE)
               .map(lambda records: tf.io.parse_example(records, spec)))
    iterator = dataset.as_numpy_iterator()
    while True:
        try:
            parsed = next(iterator)
        except StopIteration:
            return
        except tf.errors.OpError as e:
            raise InvalidInputError(
                f"TFRecord file {path!r} has a record that is corrupt or does not match "
                f"the schema of the first record ({e.message.splitlines()[0]})") from e
        yield _to_batch(parsed, schema, image_shape, path)


def open_tfrecord_source(files: Sequence[str], options: ReaderOptions) -> Source:
    """Reads the schema of TFRecord `files` and returns them as one source.

    Raises:
      InvalidInputError: If no record can be read or the schema is unusable.
    """
    first_path, record = _first_record(files)
    schema = infer_schema(first_path, record, options)
    image_shape = tuple(options.image_shape) if options.image_shape is not None else None
    if image_shape is not None:
        feature = FeatureSpec(key=IMAGE_KEY, dtype="uint8", shape=image_shape)
    else:
        columns = column_names(schema)
        feature = FeatureSpec(key=FEATURES_KEY, dtype="float32", shape=(len(columns),),
                              columns=columns)

    def read_batches() -> Iterator[ExampleBatch]:
        for path in files:
            yield from _read_file_batches(path, schema, image_shape)

    return Source(source_format="tfrecord", files=tuple(files), feature=feature,
                  class_names=None, read_batches=read_batches)
