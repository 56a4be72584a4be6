"""Listing the files of a local or remote (`gs://`, `s3://`, `minio://`) source, and the version
of their content.

One listing serves both what the shard step reads (`storage.list_uris`,
`readers.list_source_files`) and the version its cache is keyed by
(`content_version`), so the version always covers exactly the files read:

* `gs://b/dir` or `s3://b/dir/` (any remote URI): the object `dir` if it exists, else every
  object under `dir/` (never a sibling such as `dir-old/`);
* a wildcard (`*`, `?`, `[...]`) in a local path or a remote name matches
  within one path level, as the shell's glob does;
* a local directory: every file below it.

What identifies a file's content costs no read of its bytes: a `gs://`
object's generation (new at every write) and CRC32C/MD5, an S3 object's size and
ETag (a digest of its bytes), from the listing itself; a local file's inode and
ctime beside its size and mtime. A user can set mtime back (`cp -p`, `rsync -t`,
`tar x`, `os.utime`) but not ctime, which the kernel sets to now at every write,
rename or attribute change.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import hashlib
import os
import re
from typing import List

from kfdist.components.common import gcs_access, s3_access

#: The object stores by URI scheme: Google Cloud Storage, and S3 (Kubeflow Pipelines' MinIO
#: names its artifacts `minio://`).
REMOTE_STORES = {"gs://": gcs_access, "s3://": s3_access.S3, "minio://": s3_access.MINIO}
WILDCARD_CHARS = "*?["


@dataclasses.dataclass(frozen=True)
class ListedFile:
    """One file of a listing.

    Attributes:
      uri: The file's path or remote URI.
      identity: What changes whenever its content may have: `gs://` generation,
        CRC32C and MD5; S3 size and ETag; local size, mtime, ctime (ns) and inode.
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


def store(uri: str):
    """What reaches the object store `uri` names (`gcs_access`, `s3_access.S3` or
    `s3_access.MINIO`), or None for a local path."""
    scheme = uri.partition("://")[0] + "://" if "://" in uri else None
    return REMOTE_STORES.get(scheme)


def _remote_files(uri: str) -> List[ListedFile]:
    scheme, _, path = uri.partition("://")
    bucket_name, _, key = path.partition("/")
    access = store(uri)
    with access.reporting_errors(uri):
        if has_wildcard(key):
            objects = [(name, identity) for name, identity
                       in access.list_prefix(bucket_name, wildcard_base(key))
                       if _matches_per_level(name, key)]
        else:
            exact = access.stat(bucket_name, key) if key and not key.endswith("/") else None
            prefix = key.rstrip("/") + "/" if key else ""
            objects = ([(key, exact)] if exact is not None
                       else access.list_prefix(bucket_name, prefix))
    return sorted((ListedFile(f"{scheme}://{bucket_name}/{name}", identity)
                   for name, identity in objects if not name.endswith("/")),
                  key=lambda f: f.uri)


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
    """Lists the files a local path or remote URI names (see the module doc), sorted by URI.

    Args:
      uri: A local file, directory or glob; a remote object, prefix or wildcard.

    Returns:
      Each file with what identifies its content; empty if nothing matches.

    Raises:
      InvalidInputError: If the bucket does not exist or may not be read.
      GcsAccessError, S3AccessError: If there are no usable credentials, or no store at the
        endpoint.
    """
    if store(uri) is not None:
        return _remote_files(uri)
    return [ListedFile(p, _local_identity(p)) for p in sorted(_local_paths(uri))]


def source_files(uri: str) -> List[ListedFile]:
    """The files a source at `uri` is read from: `list_files` without hidden files."""
    return [f for f in list_files(uri) if not is_hidden(f.uri)]


def content_version(uri: str) -> str:
    """A digest of the source at `uri` that changes whenever a file it reads may have.

    It covers exactly `source_files(uri)`: each file's name and identity
    (see `ListedFile`), so it costs one listing (remote) or one `stat` per
    file (local), whatever the data's size.

    Args:
      uri: A local file, directory or glob; a remote object, prefix or wildcard.

    Returns:
      16 hex digits; the same while nothing under `uri` changes.
    """
    digest = hashlib.sha256()
    for listed in source_files(uri):
        digest.update(f"{listed.uri}\0{listed.identity}\n".encode())
    return digest.hexdigest()[:16]
