"""Listing the files of a local or `gs://` source, and the version of their content.

One listing serves both what the shard step reads (`storage.list_uris`,
`readers.list_source_files`) and the version its cache is keyed by
(`content_version`), so the version always covers exactly the files read:

* `gs://b/dir` or `gs://b/dir/`: the object `dir` if it exists, else every
  object under `dir/` (never a sibling such as `dir-old/`);
* a wildcard (`*`, `?`, `[...]`) in a local path or a `gs://` name matches
  within one path level, as the shell's glob does;
* a local directory: every file below it.

What identifies a file's content costs no read of its bytes: a `gs://`
object's generation (new at every write) and CRC32C/MD5, from the listing
itself; a local file's inode and ctime beside its size and mtime. A user can
set mtime back (`cp -p`, `rsync -t`, `tar x`, `os.utime`) but not ctime, which
the kernel sets to now at every write, rename or attribute change.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import hashlib
import os
import re
from typing import List

from kfdist.components.common import gcs_access

GCS_PREFIX = "gs://"
WILDCARD_CHARS = "*?["


@dataclasses.dataclass(frozen=True)
class ListedFile:
    """One file of a listing.

    Attributes:
      uri: The file's path or `gs://` URI.
      identity: What changes whenever its content may have: `gs://` generation,
        CRC32C and MD5; local size, mtime, ctime (ns) and inode.
    """

    uri: str
    identity: str


def has_wildcard(uri: str) -> bool:
    """Returns whether `uri` holds a glob wildcard (`*`, `?` or `[`)."""
    return any(ch in uri for ch in WILDCARD_CHARS)


def wildcard_base(uri: str) -> str:
    """The literal directory before a wildcard URI's first wildcard, with its `/`."""
    literal = re.split(r"[*?\[]", uri, maxsplit=1)[0]
    return literal[:literal.rfind("/") + 1]


def is_hidden(uri: str) -> bool:
    """Returns whether the file's name starts with `.` (sources skip those)."""
    return os.path.basename(uri.rstrip("/")).startswith(".")


def _matches_per_level(name: str, pattern: str) -> bool:
    names, patterns = name.split("/"), pattern.split("/")
    return len(names) == len(patterns) and all(
        fnmatch.fnmatchcase(n, p) for n, p in zip(names, patterns))


def _gcs_files(uri: str) -> List[ListedFile]:
    bucket_name, _, key = uri[len(GCS_PREFIX):].partition("/")
    with gcs_access.reporting_errors(uri):
        client = gcs_access.client()
        if has_wildcard(key):
            prefix = wildcard_base(key)
            blobs = [b for b in client.list_blobs(bucket_name, prefix=prefix)
                     if _matches_per_level(b.name, key)]
        else:
            exact = client.bucket(bucket_name).get_blob(key) if key and not key.endswith("/") else None
            prefix = key.rstrip("/") + "/" if key else ""
            blobs = [exact] if exact is not None else list(
                client.list_blobs(bucket_name, prefix=prefix))
    return sorted((ListedFile(f"{GCS_PREFIX}{bucket_name}/{b.name}",
                              f"gcs {b.size} {b.generation} {b.crc32c} {b.md5_hash}")
                   for b in blobs if not b.name.endswith("/")), key=lambda f: f.uri)


def _local_identity(path: str) -> str:
    st = os.stat(path)
    return f"local {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_dev}:{st.st_ino}"


def _local_paths(path: str) -> List[str]:
    if has_wildcard(path):
        return [p for p in glob.glob(path) if os.path.isfile(p)]
    if os.path.isdir(path):
        return [os.path.join(root, f) for root, _, files in os.walk(path) for f in files]
    return [path] if os.path.isfile(path) else []


def list_files(uri: str) -> List[ListedFile]:
    """Lists the files a local path or `gs://` URI names (see the module doc), sorted by URI.

    Args:
      uri: A local file, directory or glob; a `gs://` object, prefix or wildcard.

    Returns:
      Each file with what identifies its content; empty if nothing matches.

    Raises:
      InvalidInputError: If the `gs://` bucket does not exist or may not be read.
      GcsAccessError: If there are no usable Google credentials.
    """
    if uri.startswith(GCS_PREFIX):
        return _gcs_files(uri)
    return [ListedFile(p, _local_identity(p)) for p in sorted(_local_paths(uri))]


def source_files(uri: str) -> List[ListedFile]:
    """The files a source at `uri` is read from: `list_files` without hidden files."""
    return [f for f in list_files(uri) if not is_hidden(f.uri)]


def content_version(uri: str) -> str:
    """A digest of the source at `uri` that changes whenever a file it reads may have.

    It covers exactly `source_files(uri)`: each file's name and identity
    (see `ListedFile`), so it costs one listing (`gs://`) or one `stat` per
    file (local), whatever the data's size.

    Args:
      uri: A local file, directory or glob; a `gs://` object, prefix or wildcard.

    Returns:
      16 hex digits; the same while nothing under `uri` changes.
    """
    digest = hashlib.sha256()
    for listed in source_files(uri):
        digest.update(f"{listed.uri}\0{listed.identity}\n".encode())
    return digest.hexdigest()[:16]
