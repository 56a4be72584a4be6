"""Reading and writing local paths and remote URIs: `gs://`, `s3://` and `minio://`.

`gs://` data is moved with google-cloud-storage (which honours
`STORAGE_EMULATOR_HOST`), never with TensorFlow's own GCS client, which cannot
be pointed at an emulator; `s3://` and `minio://` data (the same S3 protocol:
Kubeflow Pipelines names its MinIO artifacts `minio://`) with boto3, configured
by the `AWS_*` variables (see `s3_access`; `minio://` without an endpoint is
Kubeflow Pipelines' own store). Components stage remote inputs to a
local directory, work locally, then upload: TensorFlow only ever sees local paths.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import List, Tuple

from kfdist.components.common import listing, s3_access
from kfdist.components.common.errors import InvalidInputError

GCS_PREFIX = "gs://"
#: The schemes of the object stores, as a person types them.
REMOTE_SCHEMES = tuple(listing.REMOTE_STORES)


def is_gcs(uri: str) -> bool:
    """Returns whether `uri` names a Google Cloud Storage object or prefix."""
    return uri.startswith(GCS_PREFIX)


def is_remote(uri: str) -> bool:
    """Returns whether `uri` names an object or prefix of an object store (`gs://`, `s3://`,
    `minio://`) rather than a local path."""
    return uri.startswith(REMOTE_SCHEMES)


def split_remote(uri: str) -> Tuple[str, str]:
    """Splits `s3://bucket/some/key` (any remote scheme) into `("bucket", "some/key")`.

    Raises:
      InvalidInputError: If `uri` is not a `SCHEME://BUCKET/...` URI of an object store.
    """
    scheme = uri.partition("://")[0]
    if not is_remote(uri) or len(uri) <= len(scheme) + 3:
        raise InvalidInputError(f"not a remote URI: {uri!r}; expected gs://BUCKET/PATH, "
                                "s3://BUCKET/PATH or minio://BUCKET/PATH")
    bucket, _, key = uri[len(scheme) + 3:].partition("/")
    if not bucket:
        raise InvalidInputError(f"{scheme}:// URI without a bucket: {uri!r}")
    return bucket, key


def split_gcs(uri: str) -> Tuple[str, str]:
    """Splits `gs://bucket/some/key` into `("bucket", "some/key")`.

    Raises:
      InvalidInputError: If `uri` is not a `gs://bucket/...` URI.
    """
    if not is_gcs(uri):
        raise InvalidInputError(f"not a gs:// URI: {uri!r}; expected gs://BUCKET/PATH")
    return split_remote(uri)


def _remote(uri: str):
    """The store of the remote `uri`, its bucket and key."""
    bucket, key = split_remote(uri)
    return listing.store(uri), bucket, key


def _reporting(uri: str):
    """The store's errors about `uri` as kfdist errors (S3's; `gs://` reports its listings')."""
    access = listing.store(uri)
    return (access.reporting_errors(uri) if isinstance(access, s3_access.S3Store)
            else contextlib.nullcontext())


def list_uris(uri: str) -> List[str]:
    """Lists the files under a directory URI, or the one file it names, sorted.

    A local path may contain glob wildcards in its last components; a remote URI
    may too (matched level by level, as the shell's glob). A remote name that is
    not an object is a prefix: the objects below `name/`.

    Args:
      uri: A local file or directory, or a `gs://`, `s3://` or `minio://` object or prefix.

    Returns:
      The matching files' URIs, sorted; empty if nothing matches.

    Raises:
      InvalidInputError: If a remote URI is malformed, or its bucket does not
        exist or may not be read.
      GcsAccessError, S3AccessError: If there are no usable credentials, or no store at the
        endpoint.
    """
    if is_remote(uri):
        split_remote(uri)
    return [listed.uri for listed in listing.list_files(uri)]


def content_version(uri: str) -> str:
    """A short digest that changes whenever a file the source at `uri` reads may have.

    See `listing.content_version`: names plus `gs://` generation and checksums,
    S3 sizes and ETags, or local size, mtime, ctime and inode; one listing, no data read.

    Returns:
      16 hex digits; the same for an unchanged source.
    """
    if is_remote(uri):
        split_remote(uri)
    return listing.content_version(uri)


def exists(uri: str) -> bool:
    """Returns whether a file (or, for local paths, a directory) exists at `uri`."""
    if is_remote(uri):
        access, bucket, key = _remote(uri)
        with _reporting(uri):
            return access.stat(bucket, key) is not None
    return os.path.exists(uri)


def download(uri: str, local_path: str) -> str:
    """Copies one file from `uri` to `local_path` (streamed, any size).

    Returns:
      `local_path`.
    """
    os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
    if is_remote(uri):
        access, bucket, key = _remote(uri)
        with _reporting(uri):
            access.download(bucket, key, local_path)
    else:
        shutil.copyfile(uri, local_path)
    return local_path


def stage_locally(uri: str, workdir: str) -> str:
    """Returns a local path holding the data at `uri`.

    Local paths are returned unchanged. A remote file or prefix is downloaded
    under `workdir`, keeping the object names below the prefix.

    Raises:
      InvalidInputError: If nothing exists at `uri`.
    """
    if not is_remote(uri):
        return uri
    files = list_uris(uri)
    if not files:
        raise InvalidInputError(f"no such file or prefix: {uri!r}")
    _, key = split_remote(uri)
    if files == [uri]:
        return download(uri, os.path.join(workdir, os.path.basename(key)))
    base = uri.rstrip("/") + "/"
    target = os.path.join(workdir, "staged")
    for f in files:
        rel = f[len(base):] if f.startswith(base) else os.path.basename(f)
        download(f, os.path.join(target, rel))
    return target


def upload_file(local_path: str, uri: str) -> None:
    """Copies one local file to `uri` (a remote object or a local path)."""
    if is_remote(uri):
        access, bucket, key = _remote(uri)
        with _reporting(uri):
            access.upload(local_path, bucket, key)
        return
    os.makedirs(os.path.dirname(os.path.abspath(uri)), exist_ok=True)
    shutil.copyfile(local_path, uri)


def copy_dir_to(local_dir: str, uri: str) -> None:
    """Copies every file below `local_dir` to `uri`: a remote prefix or a
    directory on a shared filesystem (e.g. a mounted PVC), merging into it."""
    if is_remote(uri):
        upload_dir(local_dir, uri)
        return
    shutil.copytree(local_dir, uri, dirs_exist_ok=True)


def copy_dir_from(uri: str, local_dir: str) -> str:
    """Copies every file below `uri` (a remote prefix or a directory) into
    `local_dir`, keeping relative paths, and returns `local_dir`.

    Raises:
      InvalidInputError: If nothing exists at `uri`.
    """
    if not is_remote(uri):
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
    """Deletes one file (a remote object or a local path); one already gone is not an error."""
    if is_remote(uri):
        access, bucket, key = _remote(uri)
        with _reporting(uri):
            access.delete(bucket, key)
        return
    try:
        os.remove(uri)
    except FileNotFoundError:
        pass


def remove_tree(uri: str) -> int:
    """Deletes every file below `uri` (a remote prefix or a directory); returns how many.

    Nothing there is not an error.
    """
    if not is_remote(uri):
        if not os.path.isdir(uri):
            return 0
        count = sum(len(files) for _, _, files in os.walk(uri))
        shutil.rmtree(uri)
        return count
    files = list_uris(uri)
    for f in files:
        delete(f)
    return len(files)


def join(uri: str, *parts: str) -> str:
    """Joins path parts onto a local path or a remote URI."""
    if is_remote(uri):
        return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])
    return os.path.join(uri, *parts)


def upload_dir(local_dir: str, uri: str) -> None:
    """Uploads every file below `local_dir` to the remote prefix `uri`."""
    split_remote(uri)
    for root, _, files in os.walk(local_dir):
        for name in files:
            path = os.path.join(root, name)
            upload_file(path, join(uri, os.path.relpath(path, local_dir).replace(os.sep, "/")))


def publish_dir(local_dir: str, uri: str) -> None:
    """Makes `local_dir`'s contents appear at `uri` (a local path or remote prefix).

    Local: atomic rename when `uri` does not exist yet (the directory is moved).
    Remote: uploaded file by file (objects appear as they are written; write a
    marker file last when readers need to know the upload finished).

    Raises:
      InvalidInputError: If a local `uri` already exists (nothing is overwritten).
    """
    if is_remote(uri):
        upload_dir(local_dir, uri)
        return
    if os.path.exists(uri):
        raise InvalidInputError(f"refusing to overwrite existing path {uri!r}")
    os.makedirs(os.path.dirname(os.path.abspath(uri)), exist_ok=True)
    os.replace(local_dir, uri)


def copy_tree(src_uri: str, dst_uri: str) -> List[str]:
    """Copies every object below the remote prefix `src_uri` to the same names below `dst_uri`.

    Within one store the copies are made by the storage service (rewrite or copy
    requests): no bytes pass through this machine, whatever the objects' sizes;
    between two stores each object is downloaded and uploaded.

    Returns:
      The URIs written, sorted.
    """
    base = src_uri.rstrip("/") + "/"
    written = []
    for uri in list_uris(base):
        target_uri = join(dst_uri, uri[len(base):])
        access, bucket, key = _remote(target_uri)
        if listing.store(uri) is access:
            with _reporting(target_uri):
                access.copy(split_remote(uri), bucket, key)
        else:
            with tempfile.TemporaryDirectory(prefix="kfdist-copy-") as scratch:
                upload_file(download(uri, os.path.join(scratch, "object")), target_uri)
        written.append(target_uri)
    return sorted(written)
