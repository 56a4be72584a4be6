"""The name `kfdist run` exports (serves) a model under: after its data, unless one is given.

A model is compared with the one served under its own name in the export
base (`<export_base>/<name>/<version>/`), so two tables trained into one
export base must not share a name: `penguins.csv` is served as `penguins`,
a folder `wine/` (or `wine/train.csv` beside `wine/test.csv`) as `wine`.
`--serving-model-name` chooses another.
"""

from __future__ import annotations

import os
import re
from typing import Optional

#: Longest name made from the data (a DNS label's limit, which serving platforms hold names to).
MAX_NAME_LENGTH = 63
_DATA_SUFFIX = re.compile(r"\.(csv|tsv|txt|tfrecords?|tfr|gz|gzip|zlib|zip)$", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[]")
_NOT_ALLOWED = re.compile(r"[^a-z0-9._-]+")
#: A part that only names a split (`train`, `test-00000-of-00004`, MNIST's `t10k-...`).
_SPLIT_PART = re.compile(r"^(train|training|eval|evaluation|test|testing|valid|validation|t10k)"
                         r"(?![A-Za-z0-9_])", re.IGNORECASE)


def _name_part(part: str) -> str:
    """A path part without its data-file suffixes (`train.csv.gz` -> `train`)."""
    while (stripped := _DATA_SUFFIX.sub("", part)) != part:
        part = stripped
    return part


def name_after_data(source_uri: str) -> Optional[str]:
    """A serving name after `source_uri`: its file or folder name, lower-cased, without its
    data suffixes, with what a serving path cannot hold replaced by `-`.

    The folder above stands in for a part that names a split (`train.csv`, `test/`) or is a
    wildcard (`data/*.csv`).

    Args:
      source_uri: A local path or remote URI (file, folder or wildcard).

    Returns:
      Letters, digits, `-`, `_` and `.` (at most `MAX_NAME_LENGTH`); None when no part of
      `source_uri` gives a name.
    """
    path = re.sub(r"^[a-z][a-z0-9+.-]*://", "", source_uri.strip())
    parts = [p for p in re.split(r"[/\\]", path) if p not in ("", ".", "..")]
    glob = next((i for i, p in enumerate(parts) if _GLOB.search(p)), len(parts))
    for part in reversed(parts[:glob]):
        stem = _name_part(part)
        if _SPLIT_PART.match(stem):
            continue
        name = _NOT_ALLOWED.sub("-", stem.lower()).strip("-._")[:MAX_NAME_LENGTH].rstrip("-._")
        if name:
            return name
    return None


def name_of_run_data(source_uri: Optional[str], sample: str) -> Optional[str]:
    """The serving name a run's data gives: its source's (a relative path taken from here),
    or with none the bundled `sample`'s (the penguins table: `penguins`)."""
    from kfdist.components.common import storage
    from kfdist.sample_data import SAMPLE_FILES

    if source_uri is None:
        return name_after_data(os.path.join(sample, SAMPLE_FILES.get(sample, "")))
    return name_after_data(source_uri if storage.is_remote(source_uri)
                           else os.path.abspath(source_uri))


def serving_line(opts, export_base: str) -> str:
    """The line `kfdist run` says what name the model is exported under with, and why that one.

    Args:
      opts: The run's `local_run.RunOptions`.
      export_base: Where models are exported.
    """
    why = ("--serving-model-name" if opts.serving_model_name else
           "after the data; --serving-model-name sets another"
           if name_of_run_data(opts.source_uri, opts.sample) else
           "the pipeline's; --serving-model-name sets another")
    return f"serving name: {opts.serving_name} ({why}), under {export_base}"
