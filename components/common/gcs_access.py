"""The google-cloud-storage client, and its failures as errors a user can act on.

The client honours `STORAGE_EMULATOR_HOST` (anonymous credentials then);
otherwise it uses Application Default Credentials. A missing bucket is bad
input naming it; missing or refused credentials say how to authenticate.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, List, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError, KfdistError

AUTH_HINT = ("authenticate with `gcloud auth application-default login`, or set "
             "GOOGLE_APPLICATION_CREDENTIALS to a service account key file "
             "(STORAGE_EMULATOR_HOST is honoured: set it to use a GCS emulator)")


class GcsAccessError(KfdistError):
    """Google Cloud Storage cannot be reached with the credentials at hand."""


def client():
    """A google-cloud-storage client: of the emulator at `STORAGE_EMULATOR_HOST` if set.

    Raises:
      GcsAccessError: If no Google credentials can be found.
    """
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import storage  # imported lazily: only gs:// needs it

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=os.environ.get("GOOGLE_CLOUD_PROJECT", "kfdist"),
                              credentials=AnonymousCredentials())
    try:
        return storage.Client()
    except DefaultCredentialsError as err:
        raise GcsAccessError(f"no Google credentials found to read gs://: {AUTH_HINT}") from err


@contextlib.contextmanager
def reporting_errors(uri: str) -> Iterator[None]:
    """Turns the storage service's answers about `uri` into kfdist errors.

    Args:
      uri: The `gs://` URI being read or written, named in the messages.

    Raises:
      InvalidInputError: The bucket does not exist, or these credentials may not use it.
      GcsAccessError: No credentials, or credentials the service refuses.
    """
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    bucket = uri.partition("://")[2].partition("/")[0]
    try:
        yield
    except GcsAccessError as err:
        raise GcsAccessError(f"{uri!r}: {err}") from err.__cause__
    except api.NotFound as err:
        raise InvalidInputError(f"the bucket {bucket!r} of {uri!r} does not exist; "
                                "name an existing bucket (gs://BUCKET/PATH)") from err
    except api.Forbidden as err:
        raise InvalidInputError(f"these credentials may not read the bucket {bucket!r} of "
                                f"{uri!r} ({err.message}); grant them access or "
                                f"use other credentials: {AUTH_HINT}") from err
    except (api.Unauthorized, auth.GoogleAuthError) as err:
        raise GcsAccessError(f"Google refused the credentials for {uri!r} ({err}): "
                             f"{AUTH_HINT}") from err


def _identity(blob) -> str:
    return f"gcs {blob.size} {blob.generation} {blob.crc32c} {blob.md5_hash}"


def list_prefix(bucket: str, prefix: str) -> List[Tuple[str, str]]:
    """Every object whose name starts with `prefix`: (name, what identifies its content)."""
    return [(blob.name, _identity(blob)) for blob in client().list_blobs(bucket, prefix=prefix)]


def stat(bucket: str, key: str) -> Optional[str]:
    """What identifies the object `key`'s content; None if there is no such object."""
    blob = client().bucket(bucket).get_blob(key)
    return None if blob is None else _identity(blob)


def download(bucket: str, key: str, local_path: str) -> None:
    """Copies the object `key` to `local_path` (streamed, any size)."""
    client().bucket(bucket).blob(key).download_to_filename(local_path)


def upload(local_path: str, bucket: str, key: str) -> None:
    """Copies the local file to the object `key`."""
    client().bucket(bucket).blob(key).upload_from_filename(local_path)


def delete(bucket: str, key: str) -> None:
    """Deletes the object `key`; one already gone is not an error."""
    from google.api_core import exceptions

    try:
        client().bucket(bucket).blob(key).delete()
    except exceptions.NotFound:
        pass


def copy(source: Tuple[str, str], bucket: str, key: str) -> None:
    """Copies the object `source` (bucket, key) to `key` by rewrite requests: the storage
    service copies, no bytes pass here, whatever the object's size and location."""
    storage_client = client()
    blob = storage_client.bucket(source[0]).blob(source[1])
    target = storage_client.bucket(bucket).blob(key)
    token, _, _ = target.rewrite(blob)
    while token is not None:
        token, _, _ = target.rewrite(blob, token=token)
