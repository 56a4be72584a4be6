"""The reference new data is checked against: a dataset the user names, or the served model's.

* `reference_dataset`: a directory (local, `gs://`, `s3://` or `minio://`) a shard step wrote,
  holding `metadata.json` and `statistics.json`;
* otherwise, with an export base and a model name: the dataset the served
  version (the latest under `<export_base>/<name>/`) was trained on, whose spec
  and statistics the export step copied into `<version>/assets.extra/kfdist_dataset/`;
* otherwise none: the data is described, not compared.

A reference the user names must be usable (one line saying why not); a served
version exported before statistics travelled with it is said so and skipped.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Optional, Tuple

from kfdist.components.common import serving_versions, storage
from kfdist.components.common.dataset_spec import (
    CLASSIFICATION, METADATA_FILE, REQUESTED, load_metadata)
from kfdist.components.common.dataset_statistics import (
    EXPORTED_DATASET_DIR, STATISTICS_FILE, DatasetStatistics, load_statistics)
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.label_check import dataset_classes


@dataclasses.dataclass(frozen=True)
class Reference:
    """The statistics of the reference dataset.

    Attributes:
      name: What it is, for messages (`the served version 3 (path)`, a dataset path).
      statistics: Its statistics.
      excluded: The columns its user left out (`exclude_columns`).
      classes: Its label's classes and their examples (`label_check.dataset_classes`).
      task: What its label is: `classification` or `regression`.
    """

    name: str
    statistics: DatasetStatistics
    excluded: Tuple[str, ...] = ()
    classes: Optional[Dict[str, Optional[int]]] = None
    task: str = CLASSIFICATION


def _stage(uri: str, workdir: str) -> str:
    """A local directory holding the spec and statistics of the dataset at `uri`."""
    if not storage.is_remote(uri):
        return uri
    local = os.path.join(workdir, "reference")
    for name in (METADATA_FILE, STATISTICS_FILE):
        if storage.exists(storage.join(uri, name)):
            storage.download(storage.join(uri, name), os.path.join(local, name))
    return local


def _read(uri: str, workdir: str, name: str) -> Reference:
    """The reference at `uri` (its `statistics` None when it has none)."""
    local = _stage(uri, workdir)
    meta = load_metadata(local)
    excluded = tuple(c.name for c in meta.excluded_columns or () if c.reason == REQUESTED)
    return Reference(name, load_statistics(local), excluded, dataset_classes(meta), meta.task)


def find_reference(reference_dataset: str, export_base: str, serving_model_name: str,
                   workdir: str, log: Callable[[str], None]) -> Optional[Reference]:
    """The reference (see the module docstring); None when there is none.

    Raises:
      InvalidInputError: If `reference_dataset` is not a dataset written by the
        shard step with statistics.
    """
    if reference_dataset:
        valid = "pass a dataset directory a shard step wrote (it holds metadata.json and " \
                f"{STATISTICS_FILE})"
        require(storage.exists(storage.join(reference_dataset, METADATA_FILE)),
                f"reference_dataset {reference_dataset!r} is not a kfdist dataset: it has no "
                f"{METADATA_FILE}; {valid}")
        try:
            reference = _read(reference_dataset, workdir, f"the dataset {reference_dataset}")
        except InvalidInputError as e:
            raise InvalidInputError(f"reference_dataset {reference_dataset!r}: {e}") from None
        require(reference.statistics is not None,
                f"reference_dataset {reference_dataset!r} has no {STATISTICS_FILE} (a dataset of "
                f"images, or sharded before datasets kept statistics); {valid}")
        return reference
    if not export_base or not serving_model_name:
        log("data validation: no reference (neither --reference-dataset nor an export base)")
        return None
    served = serving_versions.served_version(export_base, serving_model_name)
    if served is None:
        log(f"data validation: no served model under "
            f"{serving_versions.model_root(export_base, serving_model_name)} yet, nothing to "
            "compare with; this dataset's statistics go with the model it trains")
        return None
    where = f"{served.path}/{EXPORTED_DATASET_DIR}"
    if not storage.exists(f"{where}/{STATISTICS_FILE}"):
        log(f"data validation: the served version {served.version} ({served.path}) carries no "
            "dataset statistics (exported before they travelled with the model, or trained on "
            "images); nothing to compare with")
        return None
    return _read(where, workdir, f"the served version {served.version} ({served.path})")
