"""The versions of a model in a TF Serving layout, `<export_base>/<name>/<version>/`.

One definition for the export step (a new version goes above every existing
one) and the evaluation (the new model is compared with the served one):
the *served version* is the highest numeric version directory under
`<export_base>/<name>/`, the one TF Serving's default version policy
(`latest`) loads. Other entries (a version being written, `.tmp-*`) are not
versions; TF Serving ignores them too. Local paths and remote URIs alike.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional

from kfdist.components.common import storage


@dataclasses.dataclass(frozen=True)
class ServedVersion:
    """The version of a model TF Serving serves.

    Attributes:
      version: Its version number.
      path: Its directory, `<export_base>/<name>/<version>` (local path or remote URI).
    """

    version: int
    path: str


def model_root(export_base: str, serving_model_name: str) -> str:
    """`<export_base>/<serving_model_name>`: the directory of the model's versions."""
    return export_base.rstrip("/") + "/" + serving_model_name


def existing_versions(root: str) -> List[int]:
    """The numeric version directories under a model root, ascending (TF Serving ignores the rest)."""
    if storage.is_remote(root):
        base = root.rstrip("/") + "/"
        names = {u[len(base):].split("/", 1)[0] for u in storage.list_uris(base) if u.startswith(base)}
    else:
        names = set(os.listdir(root)) if os.path.isdir(root) else set()
    return sorted(int(n) for n in names if n.isdigit())


def served_version(export_base: str, serving_model_name: str) -> Optional[ServedVersion]:
    """The latest exported version of a model, the one TF Serving serves; None when there is none."""
    root = model_root(export_base, serving_model_name)
    versions = existing_versions(root)
    return ServedVersion(versions[-1], f"{root}/{versions[-1]}") if versions else None
