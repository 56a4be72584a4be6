"""Reading and writing local paths and `gs://` URIs.

`gs://` data is moved with google-cloud-storage (which honours
`STORAGE_EMULATOR_HOST`), never with TensorFlow's own GCS client, which cannot
be pointed at an emulator. Components stage remote inputs to a local
directory, work locally, then upload: TensorFlow only ever sees local paths.
"""

from __future__ import annotations

import os
import shutil
from typing import List, Tuple

from kfdist.components.common import gcs_access, listing
from kfdist.components.common.errors import InvalidInputError

GCS_PREFIX = "gs://"


def is_gcs(uri: str) -> bool:
    """Returns whether `uri` names a Google Cloud Storage object or prefix."""
    return uri.startswith(GCS_PREFIX)


def split_gcs(uri: str) -> Tuple[str, str]:
    """Splits `gs://bucket/some/key` into `("bucket", "some/key")`.

    Raises:
      InvalidInputError: If `uri` is not a `gs://bucket/...` URI.
    """
    if not is_gcs(uri) or len(uri) <= len(GCS_PREFIX):
        raise InvalidInputError(f"not a gs:// URI: {uri!r}; expected gs://BUCKET/PATH")
    bucket, _, key = uri[len(GCS_PREFIX):].partition("/")
    if not bucket:
        raise InvalidInputError(f"gs:// URI without a bucket: {uri!r}")
    return bucket, key


def _client():
    return gcs_access.client()


def list_uris(uri: str) -> List[str]:
    """Lists the files under a directory URI, or the one file it names, sorted.

    A local path may contain glob wildcards in its last components; a `gs://`
    URI may too (matched level by level, as the shell's glob). A `gs://` name
    that is not an object is a prefix: the objects below `name/`.

    Args:
      uri: A local file or directory, or a `gs://` object or prefix.

    Returns:
      The matching files' URIs, sorted; empty if nothing matches.

    Raises:
      InvalidInputError: If a `gs://` URI is malformed, or its bucket does not
        exist or may not be read.
      GcsAccessError: If there are no usable Google credentials.
    """
    if is_gcs(uri):
        split_gcs(uri)
    return [listed.uri for listed in listing.list_files(uri)]


def content_version(uri: str) -> str:
    """A short digest that changes whenever a file the source at `uri` reads may have.

    See `listing.content_version`: names plus `gs://` generation and checksums,
    or local size, mtime, ctime and inode; one listing, no data read.

    Returns:
      16 hex digits; the same for an unchanged source.
    """
    if is_gcs(uri):
        split_gcs(uri)
    return listing.content_version(uri)


def exists(uri: str) -> bool:
    """Returns whether a file (or, for local paths, a directory) exists at `uri`."""
    if is_gcs(uri):
        bucket, key = split_gcs(uri)
        return _client().bucket(bucket).blob(key).exists()
    return os.path.exists(uri)


def download(uri: str, local_path: str) -> str:
    """Copies one file from `uri` to `local_path` (streamed, any size).

    Returns:
      `local_path`.
    """
    os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
    if is_gcs(uri):
        bucket, key = split_gcs(uri)
        _client().bucket(bucket).blob(key).download_to_filename(local_path)
    else:
        shutil.copyfile(uri, local_path)
    return local_path


def stage_locally(uri: str, workdir: str) -> str:
    """Returns a local path holding the data at `uri`.

    Local paths are returned unchanged. A `gs://` file or prefix is downloaded
    under `workdir`, keeping the object names below the prefix.

    Raises:
      InvalidInputError: If nothing exists at `uri`.
    """
    if not is_gcs(uri):
        return uri
    files = list_uris(uri)
    if not files:
        raise InvalidInputError(f"no such file or prefix: {uri!r}")
    _, key = split_gcs(uri)
    if files == [uri]:
        return download(uri, os.path.join(workdir, os.path.basename(key)))
    base = uri.rstrip("/") + "/"
    target = os.path.join(workdir, "staged")
    for f in files:
        rel = f[len(base):] if f.startswith(base) else os.path.basename(f)
        download(f, os.path.join(target, rel))
    return target


def upload_file(local_path: str, uri: str) -> None:
    """Copies one local file to `uri` (a `gs://` object or a local path)."""
    if is_gcs(uri):
        bucket, key = split_gcs(uri)
        _client().bucket(bucket).blob(key).upload_from_filename(local_path)
        return
    os.makedirs(os.path.dirname(os.path.abspath(uri)), exist_ok=True)
    shutil.copyfile(local_path, uri)


def copy_dir_to(local_dir: str, uri: str) -> None:
    """Copies every file below `local_dir` to `uri`: a `gs://` prefix or a
    directory on a shared filesystem (e.g. a mounted PVC), merging into it."""
    if is_gcs(uri):
        upload_dir(local_dir, uri)
        return
    shutil.copytree(local_dir, uri, dirs_exist_ok=True)


def copy_dir_from(uri: str, local_dir: str) -> str:
    """Copies every file below `uri` (a `gs://` prefix or a directory) into
    `local_dir`, keeping relative paths, and returns `local_dir`.

    Raises:
      InvalidInputError: If nothing exists at `uri`.
    """
    if not is_gcs(uri):
        if not os.path.isdir(uri):
            raise InvalidInputError(f"no such directory: {uri!r}")
        shutil.copytree(uri, local_dir, dirs_exist_ok=True)
        return local_dir
    files = list_uris(uri)
    if not files:
        raise InvalidInputError(f"nothing exists under {uri!r}")
    base = uri.rstrip("/") + "/"
    for f in files:
        download(f, os.path.join(local_dir, f[len(base):]))
    return local_dir


def delete(uri: str) -> None:
    """Deletes one file (a `gs://` object or a local path); one already gone is not an error."""
    if is_gcs(uri):
        from google.api_core import exceptions

        bucket, key = split_gcs(uri)
        try:
            _client().bucket(bucket).blob(key).delete()
        except exceptions.NotFound:
            pass
        return
    try:
        os.remove(uri)
    except FileNotFoundError:
        pass


def remove_tree(uri: str) -> int:
    """Deletes every file below `uri` (a `gs://` prefix or a directory); returns how many.

    Nothing there is not an error.
    """
    if not is_gcs(uri):
        if not os.path.isdir(uri):
            return 0
        count = sum(len(files) for _, _, files in os.walk(uri))
        shutil.rmtree(uri)
        return count
    files = list_uris(uri)
    bucket = _client().bucket(split_gcs(uri)[0])
    for f in files:
        bucket.blob(split_gcs(f)[1]).delete()
    return len(files)


def join(uri: str, *parts: str) -> str:
    """Joins path parts onto a local path or a `gs://` URI."""
    if is_gcs(uri):
        return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])
    return os.path.join(uri, *parts)


def upload_dir(local_dir: str, uri: str) -> None:
    """Uploads every file below `local_dir` to the `gs://` prefix `uri`."""
    bucket_name, key = split_gcs(uri)
    bucket = _client().bucket(bucket_name)
    for root, _, files in os.walk(local_dir):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, local_dir).replace(os.sep, "/")
            bucket.blob(f"{key.rstrip('/')}/{rel}" if key else rel).upload_from_filename(path)


def publish_dir(local_dir: str, uri: str) -> None:
    """Makes `local_dir`'s contents appear at `uri` (a local path or `gs://`).

    Local: atomic rename when `uri` does not exist yet (the directory is moved).
    `gs://`: uploaded file by file (objects appear as they are written; write a
    marker file last when readers need to know the upload finished).

    Raises:
      InvalidInputError: If a local `uri` already exists (nothing is overwritten).
    """
    if is_gcs(uri):
        upload_dir(local_dir, uri)
        return
    if os.path.exists(uri):
        raise InvalidInputError(f"refusing to overwrite existing path {uri!r}")
    os.makedirs(os.path.dirname(os.path.abspath(uri)), exist_ok=True)
    os.replace(local_dir, uri)


def copy_tree(src_uri: str, dst_uri: str) -> List[str]:
    """Copies every object below the `gs://` prefix `src_uri` to the same names below `dst_uri`.

    The copies are made by the storage service (rewrite requests): no bytes
    pass through this machine, whatever the objects' sizes and locations.

    Returns:
      The `gs://` URIs written, sorted.
    """
    client = _client()
    base = src_uri.rstrip("/") + "/"
    written = []
    for uri in list_uris(base):
        target_uri = join(dst_uri, uri[len(base):])
        source_bucket, source_key = split_gcs(uri)
        target_bucket, target_key = split_gcs(target_uri)
        source = client.bucket(source_bucket).blob(source_key)
        target = client.bucket(target_bucket).blob(target_key)
        token, _, _ = target.rewrite(source)
        while token is not None:
            token, _, _ = target.rewrite(source, token=token)
        written.append(target_uri)
    return sorted(written)
