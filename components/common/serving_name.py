"""The name a model is exported (served) under: after its data, unless one is given.

A model is compared with the one served under its own name in the export
base (`<export_base>/<name>/<version>/`), so two tables trained into one
export base must not share a name: `penguins.csv` is served as `penguins`,
a folder `wine/` (or `wine/train.csv` beside `wine/test.csv`) as `wine`.
A name given (`serving_model_name`, `kfdist run --serving-model-name`) wins;
with none and data that gives none, the pipeline's own name (`tabular`).
"""

from __future__ import annotations

import os
import re
from typing import Optional

from kfdist.components.common import storage
from kfdist.components.common.errors import require

#: Longest name made from the data (a DNS label's limit, which serving platforms hold names to).
MAX_NAME_LENGTH = 63
_DATA_SUFFIX = re.compile(r"\.(csv|tsv|txt|tfrecords?|tfr|gz|gzip|zlib|zip)$", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[]")
_NOT_ALLOWED = re.compile(r"[^a-z0-9._-]+")
#: A name a serving layout's directory can have (TF Serving's model name).
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
#: A part that only names a split (`train`, `test-00000-of-00004`, MNIST's `t10k-...`).
_SPLIT_PART = re.compile(r"^(train|training|eval|evaluation|test|testing|valid|validation|t10k)"
                         r"(?![A-Za-z0-9_])", re.IGNORECASE)


def check_serving_model_name(serving_model_name: str) -> None:
    """Checks a serving model name given before anything is written.

    Raises:
      InvalidInputError: Naming the value and what a valid name is.
    """
    require(isinstance(serving_model_name, str) and bool(_NAME.match(serving_model_name))
            and serving_model_name not in (".", ".."),
            f"serving_model_name={serving_model_name!r} is invalid; expected a directory name of "
            "letters, digits, '-', '_' and '.'")


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


def name_of_data(source_uri: str) -> Optional[str]:
    """`name_after_data` of `source_uri`, a relative local path taken from the working
    directory (`train.csv` in `wine/`: `wine`)."""
    return name_after_data(source_uri if storage.is_remote(source_uri)
                           else os.path.abspath(source_uri))


def serving_name(serving_model_name: Optional[str], source_uri: str, fallback: str) -> str:
    """The name a model is served (exported, and compared with the served one) under.

    Args:
      serving_model_name: The name given; None: after the data.
      source_uri: The data the model is trained on.
      fallback: The name when `source_uri` gives none (the pipeline's own, e.g. `tabular`).

    Returns:
      `serving_model_name`, else `name_of_data(source_uri)`, else `fallback`.

    Raises:
      InvalidInputError: If `serving_model_name` is not a name a serving layout can hold.
    """
    if serving_model_name is not None:
        check_serving_model_name(serving_model_name)
    return serving_model_name or name_of_data(source_uri) or fallback


def serving_name_line(serving_model_name: Optional[str], source_uri: str, fallback: str) -> str:
    """The log line saying the name `serving_name` gives and why that one."""
    why = ("serving_model_name" if serving_model_name else
           "after the data; serving_model_name sets another" if name_of_data(source_uri) else
           f"{source_uri} gives no name; serving_model_name sets another")
    return f"serving name: {serving_name(serving_model_name, source_uri, fallback)} ({why})"
