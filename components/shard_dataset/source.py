"""What every source reader of shard_dataset produces: a `Source` of `ExampleBatch`es.

A reader validates its files when it is opened and then streams the examples
as numpy blocks (raw inputs plus int64 labels) as often as asked, so the
sharder can make several passes over a source without holding it in memory.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import zlib
from typing import BinaryIO, Callable, Iterator, Optional, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import (
    AUTO_TASK, CLASSIFICATION, REGRESSION, FeatureSpec)
from kfdist.components.common.errors import InvalidInputError

#: Examples per `ExampleBatch` (bounds the memory of one read step).
BATCH_SIZE = 1024
GZIP_MAGIC = b"\x1f\x8b"
#: Labels must be below this: a larger id is almost surely not a class id.
MAX_NUM_CLASSES = 100_000


@dataclasses.dataclass(frozen=True)
class ExampleBatch:
    """A block of consecutive examples of one source file.

    Attributes:
      inputs: Raw inputs `[B, *feature.shape]`: uint8 images or float32 features.
      labels: int64 class ids `[B]`; for a regression, float64 numbers.
      origin: The file the examples came from (for messages).
      categorical: For tables with string columns: their raw values, an object
        array of `str` `[B, len(feature.categorical_columns)]`; else None.
      first_row: For tables: the position of the first example among the data
        rows of its file (from 0), so each row's split can depend on where it
        is alone, not on which columns are read (`scan.example_keys`); else None.
    """

    inputs: np.ndarray
    labels: np.ndarray
    origin: str
    categorical: Optional[np.ndarray] = None
    first_row: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
    """User settings that shape how a source is read.

    Attributes:
      label_column: Name of the label column (CSV) or feature (TFRecord).
      image_shape: Shape of raw uint8 images stored as one bytes feature
        (TFRecord); for IDX files, the shape they must have.
      image_feature: Name of the TFRecord bytes feature holding the images
        (encoded PNG/JPEG/GIF/BMP or raw pixels); None: the only bytes
        feature of the examples.
      exclude_columns: CSV columns not read at all (as if the file lacked them).
      task: `auto`, `classification` or `regression`: what a CSV label is
        (`label_values`); other sources' labels are classes.
    """

    label_column: str = "label"
    image_shape: Optional[Tuple[int, ...]] = None
    image_feature: Optional[str] = None
    exclude_columns: Tuple[str, ...] = ()
    task: str = AUTO_TASK


@dataclasses.dataclass(frozen=True)
class Source:
    """A validated source, ready to be streamed.

    Attributes:
      source_format: `mnist_idx`, `csv`, `tfrecord` or `image_folder`.
      files: The local files read, in reading order.
      feature: The canonical input feature the examples become.
      class_names: Class display names (index = label) when the source names
        its classes, else None.
      units: The parts the source is read in, in order (a file, or an IDX
        images/labels pair), named by their (first) file: the unit of
        parallel reading.
      read_unit: Streams the examples of unit `i` (with the schema validated
        when the source was opened, so every unit reads alike anywhere).
      task: `classification` (labels are class ids) or `regression` (numbers).
    """

    source_format: str
    files: Tuple[str, ...]
    feature: FeatureSpec
    class_names: Optional[Tuple[str, ...]]
    units: Tuple[str, ...]
    read_unit: Callable[[int], Iterator[ExampleBatch]]
    task: str = CLASSIFICATION

    @property
    def is_regression(self) -> bool:
        """Whether the labels are numbers to predict rather than classes."""
        return self.task == REGRESSION

    def batches(self) -> Iterator[ExampleBatch]:
        """Streams every example of the source once, in blocks, unit after unit."""
        for index in range(len(self.units)):
            yield from self.read_unit(index)


def is_gzip_file(path: str) -> bool:
    """Returns whether the file at `path` starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_binary(path: str) -> BinaryIO:
    """Opens `path` for reading, decompressing it on the fly if it is gzip."""
    if is_gzip_file(path):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def read_fully(path: str, chunk_bytes: int = 1 << 20) -> int:
    """Reads (and for gzip, decompresses and CRC-checks) a whole file.

    Args:
      path: A local file, plain or gzip-compressed.
      chunk_bytes: Read size; memory use does not depend on the file size.

    Returns:
      The number of (decompressed) bytes in the file.

    Raises:
      InvalidInputError: If the file is a corrupt or truncated gzip file.
    """
    total = 0
    try:
        with open_binary(path) as f:
            while True:
                chunk = f.read(chunk_bytes)
                if not chunk:
                    return total
                total += len(chunk)
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile (CRC), bad deflate data, truncation
        raise InvalidInputError(
            f"corrupt gzip file {path!r} ({type(e).__name__}: {e}); "
            "replace it with an intact copy") from e


def check_labels(labels: np.ndarray, origin: str) -> None:
    """Checks that labels are class ids in [0, MAX_NUM_CLASSES).

    A regression's labels (floats) are numbers, not ids: nothing to check.

    Raises:
      InvalidInputError: Naming the first bad label and its file.
    """
    if labels.size == 0 or labels.dtype.kind == "f":
        return
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= MAX_NUM_CLASSES:
        bad = low if low < 0 else high
        raise InvalidInputError(
            f"label {bad} in {os.path.basename(origin)!r} is not a class id; "
            f"labels must be integers in [0, {MAX_NUM_CLASSES})")
