"""TFRecord sources of `tf.train.Example`s, plain or gzip (detected per file).

The schema is taken from the first record: `label_column` must be a single
int64. When the examples have a bytes feature (`image_feature`, or the only
one), it holds images: encoded PNG/JPEG/GIF/BMP (decoded while reading) or raw
uint8 pixels of a declared shape (`image_shape`, or height/width features; see
`image_decoding`); numeric features are then ignored. Otherwise every other
feature must be numeric (int64 or float, fixed length); they are concatenated
in sorted key order into the canonical float32 `features`. Records that break
the schema are reported while streaming, before any shard is written.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import FEATURES_KEY, IMAGE_KEY, FeatureSpec
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset import image_decoding
from kfdist.components.shard_dataset.image_decoding import ImageLayout
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
      image: How the examples hold their images, or None (numeric features).
    """

    label_key: str
    numeric: Tuple[NumericField, ...]
    image: Optional[ImageLayout] = None


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
            raise InvalidInputError(f"cannot read TFRecord file {path!r}: "
                                    f"{image_decoding.error_detail(e)}") from e
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
    image_key = image_decoding.image_key(path, byte_keys, options)
    if image_key is not None:
        layout = image_decoding.infer_image_layout(path, features, image_key, options)
        return ExampleSchema(label_key=label, numeric=(), image=layout)
    require(options.image_shape is None,
            f"image_shape is set, so the examples in {path!r} need a bytes feature holding "
            f"raw pixels; they have none (features {sorted(kinds)})")
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
    if schema.image is not None:
        spec[schema.image.key] = tf.io.FixedLenFeature([], tf.string)
        for key in schema.image.shape_keys:
            spec[key] = tf.io.FixedLenFeature([], tf.int64)
    for field in schema.numeric:
        dtype = tf.int64 if field.dtype == "int64" else tf.float32
        spec[field.key] = tf.io.FixedLenFeature([field.length], dtype)
    return spec


def _to_batch(parsed, schema: ExampleSchema, path: str, start: int) -> ExampleBatch:
    layout = schema.image
    if layout is not None and layout.encoding is not None:
        return image_decoding.encoded_batch(parsed, layout, path, start)
    labels = parsed[schema.label_key].astype(np.int64)
    if layout is not None:
        inputs = image_decoding.raw_images(parsed, layout, path, start)
    else:
        inputs = np.concatenate([parsed[f.key].astype(np.float32).reshape(len(labels), -1)
                                 for f in schema.numeric], axis=1)
        require(bool(np.isfinite(inputs).all()),
                f"a numeric feature in {path!r} is NaN or infinite; inputs must be finite")
    return ExampleBatch(inputs=inputs, labels=labels, origin=path)


def _dataset(path: str, schema: ExampleSchema):
    """Blocks of `BATCH_SIZE` parsed records (decoded images for encoded ones)."""
    import tensorflow as tf

    layout = schema.image
    if layout is not None and layout.encoding is not None:
        return image_decoding.encoded_dataset(path, compression_of(path), layout,
                                              schema.label_key)
    spec = _parse_spec(schema)
    return (tf.data.TFRecordDataset(path, compression_of(path)).batch(BATCH_SIZE)
            .map(lambda records: tf.io.parse_example(records, spec)))


def _read_file_batches(path: str, schema: ExampleSchema) -> Iterator[ExampleBatch]:
    import tensorflow as tf

    iterator = _dataset(path, schema).as_numpy_iterator()
    start = 0
    while True:
        try:
            parsed = next(iterator)
        except StopIteration:
            return
        except tf.errors.OpError as e:
            if schema.image is not None and schema.image.encoding is not None:
                image_decoding.find_undecodable(path, compression_of(path), schema.image, start)
            raise InvalidInputError(
                f"TFRecord file {path!r} has a record that is corrupt or does not match "
                f"the schema of the first record ({e.message.splitlines()[0]})") from e
        batch = _to_batch(parsed, schema, path, start)
        start += len(batch.labels)
        yield batch


def open_tfrecord_source(files: Sequence[str], options: ReaderOptions) -> Source:
    """Reads the schema of TFRecord `files` and returns them as one source.

    Raises:
      InvalidInputError: If no record can be read or the schema is unusable.
    """
    first_path, record = _first_record(files)
    schema = infer_schema(first_path, record, options)
    if schema.image is not None:
        feature = FeatureSpec(key=IMAGE_KEY, dtype="uint8", shape=schema.image.shape,
                              encoding=schema.image.encoding)
    else:
        columns = column_names(schema)
        feature = FeatureSpec(key=FEATURES_KEY, dtype="float32", shape=(len(columns),),
                              columns=columns)

    def read_unit(index: int) -> Iterator[ExampleBatch]:
        return _read_file_batches(files[index], schema)

    return Source(source_format="tfrecord", files=tuple(files), feature=feature,
                  class_names=None, units=tuple(files), read_unit=read_unit)
