"""The data the shard step reads: a path or URI (`source_uri`), or an upstream step's `Dataset`.

A pipeline that prepares its data in a step of its own hands its output artifact to the shard
step as `source`. The step then reads the artifact's local copy (`.path`: KFP's launcher
downloads it, a file or a folder, before the step starts; under kfp.local it is the file
itself), and names the model after the artifact's URI, whose last part is the upstream
output's name (`.../prepare-table/wine`: `wine`), as it names it after `source_uri`.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from kfp import dsl

from kfdist.components.common.errors import require


class GivenData(NamedTuple):
    """Where the shard step reads its data, and what it names the model after.

    Attributes:
      read_from: A local path or object store URI the shard step reads.
      named_after: The path or URI the serving name is made after (`serving_name`).
    """

    read_from: str
    named_after: str


def chosen(source_uri: str, source: Optional[dsl.Artifact]) -> GivenData:
    """The data of exactly one of `source_uri` and the input artifact `source`.

    Args:
      source_uri: The `source_uri` given; empty (or blank) when none is.
      source: The `Dataset` given as `source`; None when none is.

    Returns:
      `source_uri`, read and named after; else the artifact's local path, read, and its URI,
      named after.

    Raises:
      InvalidInputError: Naming `source_uri` and `source` and their values, when both or
        neither are given.
    """
    has_uri = bool(source_uri.strip())
    got = "no source" if source is None else f"source={source.uri!r}"
    require(has_uri != (source is not None),
            "give exactly one of source_uri (a path or a gs://, s3:// or minio:// URI) and source "
            f"(an upstream step's Dataset); got source_uri={source_uri!r} and {got}")
    if has_uri:
        return GivenData(read_from=source_uri, named_after=source_uri)
    return GivenData(read_from=source.path, named_after=source.uri)
