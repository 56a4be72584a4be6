"""Runtime of `export_saved_model`: publish a blessed model for TF Serving.

The export is a TF Serving model version, `<export_base>/<name>/<version>/`,
whose `serving_default` signature takes raw inputs as the dataset's feature
spec describes them (`common/serving_inputs.py`: uint8 `image` [None, 28, 28]
for MNIST, encoded `image_bytes` for PNG/JPEG sources, one input per column
by name for tables), applies the recorded preprocessing, runs the model and
returns `class_ids` (int64 [None]), `class_names` (string [None], the
dataset's name of each class) and `probabilities` (float32 [None,
num_classes]), or for a regression `value` (float32 [None], the predicted
number in the label's units). That SavedModel is the model artifact's `serving_model/`,
which training writes (`common/serving_model.py`): the export copies it, so
the step needs no TensorFlow. `assets.extra/kfdist_export.json` describes the
signature; `assets.extra/kfdist_dataset/` holds the spec and statistics of the
dataset the model was trained on (the next run's reference: `shard_dataset/reference.py`).
Unblessed models are not exported: the pipelines skip the step
under `dsl.If(blessed)`, and the step itself, run without that gate, writes
nothing and records why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from typing import Callable, Optional

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common.dataset_statistics import EXPORTED_DATASET_DIR, STATISTICS_FILE
from kfdist.components.common import model_artifact as ma
from kfdist.components.common import serving_versions, storage
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.common.serving_inputs import SIGNATURE_NAME, VALUE_OUTPUT, serving_inputs
from kfdist.components.common.serving_name import check_serving_model_name

EXPORT_INFO_FILE = "kfdist_export.json"
EXPORT_FORMAT = "kfdist.export/v1"
#: What an export can publish, preferred first: the serving SavedModel training wrote, or
#: (an artifact from before that) the Keras SavedModel to build it from.
_PUBLISHABLE = (ma.SERVING_MODEL_DIR, ma.SAVED_MODEL_DIR)


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """Outcome of an export.

    Attributes:
      exported: Whether a model version was written.
      path: The version directory written (local path or remote URI), or None.
      version: The TF Serving version number written, or None.
      reason: Why it was (not) exported.
    """

    exported: bool
    path: Optional[str]
    version: Optional[int]
    reason: str


def validate_export_args(*, serving_model_name: str = "mnist", export_base: Optional[str] = None,
                         version: Optional[int] = None) -> None:
    """Checks export parameters before anything is written.

    Args:
      serving_model_name: TF Serving model name: letters, digits, `-`, `_`, `.`.
      export_base: Local path or `gs://`, `s3://` or `minio://BUCKET/PATH`; None skips this check.
      version: A positive integer, or None for the default.

    Raises:
      InvalidInputError: Naming the first invalid value and what would be valid.
    """
    check_serving_model_name(serving_model_name)
    require(version is None or (isinstance(version, int) and not isinstance(version, bool) and version > 0),
            f"version={version!r} is invalid; expected a positive integer or None (current Unix time)")
    if export_base is not None:
        require(bool(export_base), "export_base is empty; expected a local directory or "
                "gs://, s3:// or minio://BUCKET/PATH")
        if storage.is_remote(export_base):
            storage.split_remote(export_base)  # validates the bucket part


def _stage_model(model_dir: str, work: str) -> str:
    """A local directory holding what the export reads of a model artifact.

    A local artifact is used in place; of a remote one only the metadata and
    the SavedModel to publish are downloaded (not its checkpoints).

    Raises:
      InvalidInputError: If the artifact lacks its metadata or a SavedModel.
    """
    local = model_dir
    if storage.is_remote(model_dir):
        local = os.path.join(work, "model")
        for name in (ma.DATASET_METADATA_FILE, ma.DATASET_STATISTICS_FILE):
            if storage.exists(storage.join(model_dir, name)):
                storage.download(storage.join(model_dir, name), os.path.join(local, name))
        for entry in _PUBLISHABLE:  # the first one the artifact has
            if storage.list_uris(storage.join(model_dir, entry) + "/"):
                storage.copy_dir_from(storage.join(model_dir, entry), os.path.join(local, entry))
                break
    expected = "expected a model artifact from train_distributed"
    require(os.path.isfile(os.path.join(local, ma.DATASET_METADATA_FILE)),
            f"model_dir {model_dir!r} has no {ma.DATASET_METADATA_FILE} ({expected})")
    require(any(os.path.isdir(os.path.join(local, entry)) for entry in _PUBLISHABLE),
            f"model_dir {model_dir!r} has neither {' nor '.join(_PUBLISHABLE)} ({expected})")
    return local


def _export_info(meta: ds.DatasetMetadata, *, target: str, version: int, name: str,
                 blessing_reason: str, source: str) -> dict:
    """The contents of `assets.extra/kfdist_export.json`: what was exported, and its signature."""
    return {
        "format": EXPORT_FORMAT, "model_source": source, "serving_model_name": name,
        "version": version, "path": target, "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "blessing_reason": blessing_reason,
        "feature": dataclasses.asdict(meta.feature), "preprocessing": dataclasses.asdict(meta.preprocessing),
        "task": meta.task,
        "num_classes": meta.num_classes,
        "class_names": None if meta.is_regression else list(ds.display_class_names(meta)),
        # Number labels of a dataset that predates class counts named every id up to the max.
        "classes_counted": meta.class_counts is not None,
        "signature": {"name": SIGNATURE_NAME, "inputs": {
            i.name: {"dtype": i.dtype, "shape": list(i.shape), "kind": i.kind,
                     **({"column": i.column} if i.column is not None else {})}
            for i in serving_inputs(meta)}, "outputs": _outputs(meta)},
    }


def _outputs(meta: ds.DatasetMetadata) -> dict:
    """The serving signature's outputs: a regression's predicted number (`value`, in the
    label's units), else the class ids, names and probabilities."""
    if meta.is_regression:
        return {VALUE_OUTPUT: {"dtype": "float32", "shape": [None]}}
    return {"class_ids": {"dtype": "int64", "shape": [None]},
            "class_names": {"dtype": "string", "shape": [None]},
            "probabilities": {"dtype": "float32", "shape": [None, meta.num_classes]}}


def _write_version(model_dir: str, out_dir: str, **info) -> None:
    """Fills `out_dir` with the serving SavedModel and its kfdist_export.json.

    The artifact's `serving_model/` is copied as it is (no TensorFlow needed).
    An artifact from before kfdist wrote one has its serving SavedModel built
    here from `saved_model/`, as training builds it now.
    """
    with open(os.path.join(model_dir, ma.DATASET_METADATA_FILE)) as f:
        meta = ds.DatasetMetadata.from_json(f.read())
    serving = os.path.join(model_dir, ma.SERVING_MODEL_DIR)
    if os.path.isdir(serving):
        shutil.copytree(serving, out_dir, dirs_exist_ok=True)
    else:
        from kfdist.components.common import serving_model

        serving_model.save_serving_model(os.path.join(model_dir, ma.SAVED_MODEL_DIR), meta, out_dir)
    os.makedirs(os.path.join(out_dir, "assets.extra"), exist_ok=True)
    with open(os.path.join(out_dir, "assets.extra", EXPORT_INFO_FILE), "w") as f:
        json.dump(_export_info(meta, **info), f, indent=2)
    _copy_training_data(model_dir, out_dir)


def _copy_training_data(model_dir: str, out_dir: str) -> None:
    """Puts the spec and statistics of the dataset the model was trained on into the version
    (`dataset_statistics.EXPORTED_DATASET_DIR`): the next run's shard step checks new data
    against them."""
    target = os.path.join(out_dir, *EXPORTED_DATASET_DIR.split("/"))
    os.makedirs(target, exist_ok=True)
    shutil.copyfile(os.path.join(model_dir, ma.DATASET_METADATA_FILE),
                    os.path.join(target, ds.METADATA_FILE))
    statistics = os.path.join(model_dir, ma.DATASET_STATISTICS_FILE)
    if os.path.isfile(statistics):
        shutil.copyfile(statistics, os.path.join(target, STATISTICS_FILE))


def _upload(local_dir: str, uri: str) -> None:
    """Uploads a SavedModel with saved_model.pb last, so a complete file set precedes it."""
    pb = os.path.join(local_dir, "saved_model.pb")
    with tempfile.TemporaryDirectory(prefix="kfdist-pb-") as last:
        shutil.move(pb, os.path.join(last, "saved_model.pb"))
        storage.upload_dir(local_dir, uri)
        storage.upload_dir(last, uri)


def export(model_dir: str, export_base: str, *, serving_model_name: str = "mnist", blessed: bool,
           blessing_reason: str = "", version: Optional[int] = None,
           log: Callable[[str], None] = print) -> ExportResult:
    """Exports a blessed model as a new TF Serving version; skips unblessed ones.

    Args:
      model_dir: Model artifact directory (local or remote), see `model_artifact`.
      export_base: TF Serving base path (local or remote); the version is written to
        `<export_base>/<serving_model_name>/<version>/`.
      serving_model_name: TF Serving model name: letters, digits, `-`, `_`, `.`.
      blessed: The evaluation's verdict; nothing is written unless True.
      blessing_reason: The evaluation's reason, recorded in the result and export info.
      version: Version number (> 0, above every existing version); default: the current
        Unix time in seconds, or one above the latest existing version if that is higher.
      log: Receives progress lines.

    Returns:
      What was exported, where, and why.

    Raises:
      InvalidInputError: On an invalid name, version or base, a missing model artifact,
        or a version that exists already or is not above the latest one.
    """
    validate_export_args(serving_model_name=serving_model_name, export_base=export_base, version=version)
    if not blessed:
        reason = f"not exported: model not blessed ({blessing_reason or 'no reason given'})"
        log(reason)
        return ExportResult(exported=False, path=None, version=None, reason=reason)

    with tempfile.TemporaryDirectory(prefix="kfdist-export-") as work:
        local_model = _stage_model(model_dir, work)
        model_root = serving_versions.model_root(export_base, serving_model_name)
        existing = serving_versions.existing_versions(model_root)
        latest = existing[-1] if existing else 0
        if version is None:
            version = max(int(time.time()), latest + 1)
        require(version not in existing,
                f"version {version} already exists under {model_root!r}; refusing to overwrite it "
                "(choose a new version or leave version unset)")
        require(version > latest, f"version {version} is not above the latest version {latest} under "
                f"{model_root!r}; TF Serving would keep serving {latest}")
        target = f"{model_root}/{version}"
        info = dict(target=target, version=version, name=serving_model_name,
                    blessing_reason=blessing_reason, source=model_dir)
        log(f"exporting {model_dir} to {target}")
        if storage.is_remote(target):
            out = os.path.join(work, str(version))
            _write_version(local_model, out, **info)
            require(not storage.list_uris(target + "/"), f"{target!r} appeared during the export; not overwriting it")
            _upload(out, target)
        else:
            os.makedirs(model_root, exist_ok=True)
            # Next to the target (same filesystem, so the rename is atomic); TF Serving
            # ignores the non-numeric name while it is written.
            out = tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=model_root)
            try:
                _write_version(local_model, out, **info)
                if os.path.exists(target):
                    raise InvalidInputError(f"{target!r} appeared during the export; not overwriting it")
                os.chmod(out, 0o755)  # mkdtemp made it private; servers must read it
                os.rename(out, target)
            finally:
                shutil.rmtree(out, ignore_errors=True)
    reason = f"exported version {version}: {blessing_reason or 'model blessed'}"
    log(f"{reason} -> {target}")
    return ExportResult(exported=True, path=target, version=version, reason=reason)
