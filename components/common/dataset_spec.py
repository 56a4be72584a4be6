"""The on-disk contract of a sharded kfdist dataset (the `Dataset` artifact).

Layout of a dataset directory::

    metadata.json                              # DatasetMetadata, written last
    statistics.json                            # tables: per-column statistics (dataset_statistics)
    validation.json, data_validation.html      # tables: the check against a reference (data_check)
    train/shard-00000-of-00004.tfrecord[.gz]   # tf.train.Example records
    eval/shard-00000-of-00002.tfrecord[.gz]

Every example is in canonical form: one input feature plus a `label` (an int64 class id, or for
a regression's table a float32 number: `task`), and for tables with string columns a third
feature. The input is either

* `image`: raw uint8 pixels as one bytes value (row-major, `shape` e.g. [28, 28] or [32, 32, 3]),
  with `Preprocessing(kind="scale")`. When the source held encoded images (PNG, JPEG), they are
  stored decoded and `encoding` says which format the serving signature accepts; or
* `features`: a float_list of `shape[0]` values (numeric columns, in `columns` order), with
  `Preprocessing(kind="standardize", mean=..., std=...)`, plus, when the table has string columns,
  `categorical`: a bytes_list of their raw values in `categorical_columns` order, with one
  vocabulary per column (`Preprocessing.vocabularies`, learnt from the train split).

A table's cell is missing when it holds one of `MISSING_VALUES`, in a numeric and a string column
alike: a missing number is NaN; a missing string is kept as written, is no value of its column's
vocabulary and sets none of its one-hot block; the statistics count both as missing.

The split is `hash` (a stable hash puts `eval_fraction` of the examples into `eval`) or
`predefined` (the source named its splits: `split_files` lists the source files of each).

Preprocessing is recorded here, computed once when sharding; training, evaluation and the serving
signature all apply it from this record. `metadata.json` is written after every shard, inside a
temporary directory that is renamed into place, so a dataset with a metadata file is complete.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError
# Parts of this contract defined beside it, used here and by its readers.
from kfdist.components.common.excluded_column import (  # noqa: F401
    IDENTIFIER, REQUESTED, ExcludedColumn)
from kfdist.components.common.label_task import (  # noqa: F401
    AUTO_TASK, CLASSIFICATION, REGRESSION, TASKS, LabelStatistics)

FORMAT_VERSION = "kfdist.dataset/v2"
#: Older formats this release reads (v2 added optional fields only).
READABLE_FORMATS = ("kfdist.dataset/v1", FORMAT_VERSION)
METADATA_FILE = "metadata.json"
LABEL_KEY = "label"
IMAGE_KEY = "image"
FEATURES_KEY = "features"
CATEGORICAL_KEY = "categorical"
#: What a missing table cell holds (see the module docstring), as read from a CSV file.
MISSING_VALUES = frozenset(("", "NA", "N/A", "NaN", "nan", "NAN", "null", "NULL", "None", "?"))
#: How examples were put into splits.
HASH_SPLIT, PREDEFINED_SPLIT = "hash", "predefined"
SPLITS = ("train", "eval")


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """The one input feature of every example.

    Attributes:
      key: `image` (raw uint8 bytes) or `features` (float_list).
      dtype: `uint8` for images, `float32` for feature vectors.
      shape: Shape of one example's input, e.g. (28, 28) or (13,).
      columns: Source column names for `features`, in vector order.
      encoding: For `image`: the format the source's images were encoded in
        (`png`, `jpeg`, `gif`, `bmp`), or None for raw pixels.
      categorical_columns: Names of the string columns stored in the
        `categorical` feature, in order (None: the table has none).
    """

    key: str
    dtype: str
    shape: Tuple[int, ...]
    columns: Optional[Tuple[str, ...]] = None
    encoding: Optional[str] = None
    categorical_columns: Optional[Tuple[str, ...]] = None


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """How raw inputs become model inputs: `x * scale + offset` or `(x - mean) / std`.

    Attributes:
      kind: `scale` or `standardize`.
      scale: Multiplier for `scale` (1/255 for pixels).
      offset: Added after scaling for `scale`.
      mean: Per-column means for `standardize`.
      std: Per-column standard deviations for `standardize` (zeros replaced by 1).
      vocabularies: Per categorical column, its known values (most frequent in
        the train split first); a value outside it is one more "unknown" class.
    """

    kind: str
    scale: Optional[float] = None
    offset: Optional[float] = None
    mean: Optional[Tuple[float, ...]] = None
    std: Optional[Tuple[float, ...]] = None
    vocabularies: Optional[Tuple[Tuple[str, ...], ...]] = None


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One TFRecord file of a split.

    Attributes:
      path: Path relative to the dataset root, e.g. `train/shard-00000-of-00004.tfrecord.gz`.
      num_examples: Records in the file.
      sha256: Hex SHA-256 of the file's bytes.
      num_bytes: File size in bytes.
    """

    path: str
    num_examples: int
    sha256: str
    num_bytes: int


@dataclasses.dataclass(frozen=True)
class SplitInfo:
    """A split (`train` or `eval`) and its shards."""

    num_examples: int
    shards: Tuple[ShardInfo, ...]


@dataclasses.dataclass(frozen=True)
class DatasetMetadata:
    """Everything downstream steps need to read and preprocess a dataset.

    Attributes:
      source_uri: Where the examples came from.
      source_format: `mnist_idx`, `csv`, `tfrecord` or `image_folder`.
      feature: The input feature.
      num_classes: Number of label classes (labels are 0..num_classes-1).
      preprocessing: Recorded preprocessing of the input feature.
      compression: `GZIP` or None.
      seed: Shuffle seed used.
      eval_fraction: Fraction of examples hashed into `eval` (None for a
        predefined split).
      splits: `train` and `eval` split infos.
      class_names: Display names of the classes, index = label.
      split: `hash` or `predefined`.
      split_files: For `predefined`: the source files (relative to the
        source) of each split.
      excluded_columns: Source columns left out of the dataset, and why
        (None: none).
      label_column: The source's label column or feature (None: the source's
        folders or files name the classes).
      class_counts: Per split, its examples of each class id (index = label; None:
        written before datasets counted them, or a regression's label).
      task: `classification` (the label is a class id) or `regression` (a float32 number;
        `num_classes` is then 0).
      label_statistics: For `regression`: the label's figures per split (`train`, `eval`).
    """

    source_uri: str
    source_format: str
    feature: FeatureSpec
    num_classes: int
    preprocessing: Preprocessing
    compression: Optional[str]
    seed: int
    eval_fraction: Optional[float]
    splits: Dict[str, SplitInfo]
    class_names: Optional[Tuple[str, ...]] = None
    split: str = HASH_SPLIT
    split_files: Optional[Dict[str, Tuple[str, ...]]] = None
    excluded_columns: Optional[Tuple[ExcludedColumn, ...]] = None
    label_column: Optional[str] = None
    class_counts: Optional[Dict[str, Tuple[int, ...]]] = None
    task: str = CLASSIFICATION
    label_statistics: Optional[Dict[str, LabelStatistics]] = None
    format_version: str = FORMAT_VERSION

    @property
    def is_regression(self) -> bool:
        """Whether the label is a number to predict rather than a class."""
        return self.task == REGRESSION

    def shard_paths(self, root: str, split: str) -> List[str]:
        """Returns the absolute paths of `split`'s shards under dataset `root`."""
        if split not in self.splits:
            raise InvalidInputError(f"unknown split {split!r}; the dataset has {sorted(self.splits)}")
        return [os.path.join(root, s.path) for s in self.splits[split].shards]

    def to_json(self) -> str:
        """Serialises to the JSON stored in `metadata.json`."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DatasetMetadata":
        """Parses `metadata.json` text."""
        d = json.loads(text)
        if d.get("format_version") not in READABLE_FORMATS:
            raise InvalidInputError(
                f"dataset format {d.get('format_version')!r} is not one of {READABLE_FORMATS}; "
                "re-create it with shard_dataset")
        feature = d["feature"]
        feature["shape"] = tuple(feature["shape"])
        for k in ("columns", "categorical_columns"):
            if feature.get(k) is not None:
                feature[k] = tuple(feature[k])
        pre = d["preprocessing"]
        for k in ("mean", "std"):
            if pre.get(k) is not None:
                pre[k] = tuple(pre[k])
        if pre.get("vocabularies") is not None:
            pre["vocabularies"] = tuple(tuple(v) for v in pre["vocabularies"])
        split_files = d.get("split_files")
        excluded = d.get("excluded_columns")
        class_counts = d.get("class_counts")
        label_statistics = d.get("label_statistics")
        splits = {
            name: SplitInfo(num_examples=s["num_examples"],
                            shards=tuple(ShardInfo(**sh) for sh in s["shards"]))
            for name, s in d["splits"].items()
        }
        return cls(
            source_uri=d["source_uri"], source_format=d["source_format"],
            feature=FeatureSpec(**feature), num_classes=d["num_classes"],
            preprocessing=Preprocessing(**pre), compression=d["compression"],
            seed=d["seed"], eval_fraction=d["eval_fraction"], splits=splits,
            class_names=tuple(d["class_names"]) if d.get("class_names") else None,
            split=d.get("split", HASH_SPLIT),
            split_files={k: tuple(v) for k, v in split_files.items()} if split_files else None,
            excluded_columns=tuple(ExcludedColumn(**e) for e in excluded) if excluded else None,
            label_column=d.get("label_column"),
            class_counts=({k: tuple(v) for k, v in class_counts.items()}
                          if class_counts is not None else None),
            task=d.get("task", CLASSIFICATION),
            label_statistics=({k: LabelStatistics(**v) for k, v in label_statistics.items()}
                              if label_statistics else None),
            format_version=d["format_version"])


def model_input_shape(meta: DatasetMetadata) -> Tuple[int, ...]:
    """Shape of one *preprocessed* input, what every model takes: images and numeric vectors
    keep `feature.shape`; a table's categorical columns add a one-hot block each (its vocabulary
    plus one unknown slot)."""
    vocabularies = meta.preprocessing.vocabularies or ()
    if meta.feature.key != FEATURES_KEY or not vocabularies:
        return tuple(meta.feature.shape)
    return (int(meta.feature.shape[0]) + sum(len(v) + 1 for v in vocabularies),)


def display_class_names(meta: DatasetMetadata) -> Tuple[str, ...]:
    """The classes' names, index = label: the source's label vocabulary, else the labels."""
    return tuple(meta.class_names or (str(i) for i in range(meta.num_classes)))


def write_metadata(root: str, metadata: DatasetMetadata) -> None:
    """Writes `metadata.json` under `root` (call it after every shard is closed)."""
    with open(os.path.join(root, METADATA_FILE), "w") as f:
        f.write(metadata.to_json())


def load_metadata(root: str) -> DatasetMetadata:
    """Reads the metadata of the dataset at local directory `root`.

    Raises:
      InvalidInputError: If `root` holds no complete kfdist dataset.
    """
    path = os.path.join(root, METADATA_FILE)
    if not os.path.isfile(path):
        raise InvalidInputError(
            f"{root!r} is not a kfdist dataset: {METADATA_FILE} is missing "
            "(create one with shard_dataset)")
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        return DatasetMetadata.from_json(text)
    except InvalidInputError:
        raise
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{path!r} is not a kfdist dataset's metadata: it is not JSON "
                                f"({e}); create the dataset with shard_dataset") from None
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise InvalidInputError(f"{path!r} is not a kfdist dataset's metadata: "
                                f"{type(e).__name__} {e} (a field is missing or of the wrong "
                                "type); create the dataset with shard_dataset") from None
