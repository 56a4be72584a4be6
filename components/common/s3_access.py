"""The S3 store (`s3://` and `minio://` URIs) through boto3, and its failures as errors a user
can act on.

The configuration is the AWS SDKs': credentials from boto3's default chain
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_PROFILE` and
`~/.aws/credentials`, a pod's web identity or an instance role); the region from `AWS_REGION`
or `AWS_DEFAULT_REGION` (default us-east-1); an S3-compatible store's endpoint (MinIO,
SeaweedFS, Kubeflow Pipelines' own) from `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, addressed
path-style (`ENDPOINT/BUCKET/KEY`). `minio://BUCKET/KEY`, as Kubeflow Pipelines names its
artifacts, is `s3://BUCKET/KEY` with the same configuration, except that without an endpoint
variable it is Kubeflow Pipelines' own store, `kfp_object_store.MINIO_ENDPOINT` (where KFP's
launcher reaches `minio://`), while `s3://` is AWS's S3.

`S3` and `MINIO` are the two stores (one per scheme); each has the functions every object
store has (`list_prefix`, `stat`, `download`, `upload`, `delete`, `copy`, `reporting_errors`).

Every function takes a bucket and a key and reports a missing bucket as bad input naming it,
and missing or refused credentials or an unreachable endpoint as an `S3AccessError` saying
what to set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from typing import Iterator, List, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError, KfdistError
from kfdist.components.common.kfp_object_store import MINIO_ENDPOINT

#: The variables naming an S3-compatible store's endpoint, the first set wins (boto3's order).
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
DEFAULT_REGION = "us-east-1"
#: The variables the client is made from: a change to any of them makes a new client.
CLIENT_VARIABLES = (*ENDPOINT_VARIABLES, *REGION_VARIABLES, "AWS_ACCESS_KEY_ID",
                    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")
CREDENTIALS_HINT = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for "
                    "temporary credentials), or AWS_PROFILE of ~/.aws/credentials")
ENDPOINT_HINT = ("set AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) to the store's address (minio:// "
                 f"without it: Kubeflow Pipelines' own store, {MINIO_ENDPOINT})")
#: The codes of a request whose credentials the store does not accept.
REFUSED_CREDENTIALS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                       "InvalidToken", "TokenRefreshRequired", "AuthorizationHeaderMalformed")
NO_SUCH_KEY = ("404", "NoSuchKey", "NotFound")


class S3AccessError(KfdistError):
    """The S3 store cannot be reached, or not with the credentials at hand."""


def configured_endpoint() -> Optional[str]:
    """The endpoint the environment names (AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL), if any."""
    return next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)


@functools.lru_cache(maxsize=4)
def _client(pid: int, endpoint_url: Optional[str], variables: Tuple[Optional[str], ...]):
    del pid, variables  # the cache key: boto3 reads the environment itself
    import boto3  # imported lazily: only s3:// needs it
    from botocore.config import Config

    region = next((os.environ[n] for n in REGION_VARIABLES if os.environ.get(n)), DEFAULT_REGION)
    config = Config(connect_timeout=10, retries={"mode": "standard", "max_attempts": 3},
                    s3={"addressing_style": "path"} if endpoint_url else None)
    return boto3.session.Session().client("s3", region_name=region, endpoint_url=endpoint_url,
                                          config=config)


def _code(err: BaseException) -> Optional[str]:
    """The S3 error code of a failed request (also when boto3's transfer wrapped it)."""
    from botocore.exceptions import ClientError

    for cause in (err, err.__cause__, err.__context__):
        if isinstance(cause, ClientError):
            return str(cause.response.get("Error", {}).get("Code"))
    return None


def _identity(entry: dict) -> str:
    return f"s3 {entry['Size']} {entry['ETag']}"


@dataclasses.dataclass(frozen=True)
class S3Store:
    """The S3 store one URI scheme names.

    Attributes:
      scheme: `s3` or `minio`, as the URIs spell it.
      default_endpoint: The endpoint where the environment names none (None: AWS's S3).
    """

    scheme: str
    default_endpoint: Optional[str] = None

    def endpoint(self) -> Optional[str]:
        """The store's endpoint: the environment's, else the scheme's default; None: AWS's S3."""
        return configured_endpoint() or self.default_endpoint

    def client(self):
        """A boto3 S3 client configured from the environment (see the module): one per
        process and configuration, so its connections are reused."""
        return _client(os.getpid(), self.endpoint(),
                       tuple(os.environ.get(name) for name in CLIENT_VARIABLES))

    @contextlib.contextmanager
    def reporting_errors(self, uri: str) -> Iterator[None]:
        """Turns the store's answers about `uri` into kfdist errors.

        Args:
          uri: The `s3://` or `minio://` URI being read or written, named in the messages.

        Raises:
          InvalidInputError: The bucket or object does not exist, or these credentials may
            not use the bucket.
          S3AccessError: No credentials, credentials the store refuses, or no store at the
            endpoint.
        """
        from boto3.exceptions import S3TransferFailedError, S3UploadFailedError
        from botocore import exceptions as bx

        scheme, _, path = uri.partition("://")
        bucket = path.partition("/")[0]
        where = f"the S3 store at {self.endpoint()}" if self.endpoint() else "AWS S3"
        try:
            yield
        except bx.NoCredentialsError as err:
            raise S3AccessError(f"no S3 credentials found to use {uri!r}: "
                                f"{CREDENTIALS_HINT}") from err
        except (bx.EndpointConnectionError, bx.ConnectionError) as err:
            raise S3AccessError(f"cannot reach {where} for {uri!r}: {ENDPOINT_HINT}") from err
        except (bx.ClientError, S3UploadFailedError, S3TransferFailedError) as err:
            code = _code(err)
            if code == "NoSuchBucket":
                raise InvalidInputError(
                    f"the bucket {bucket!r} of {uri!r} does not exist on {where}; "
                    f"name an existing bucket ({scheme}://BUCKET/PATH)") from err
            if code in NO_SUCH_KEY:
                raise InvalidInputError(f"no such object (or bucket) on {where}: {uri!r}") from err
            if code in REFUSED_CREDENTIALS or code == "403":
                raise S3AccessError(f"{where} refused the credentials for {uri!r} ({code}): "
                                    f"{CREDENTIALS_HINT}") from err
            if code == "AccessDenied":
                raise InvalidInputError(
                    f"these credentials may not use the bucket {bucket!r} of {uri!r} on "
                    f"{where}; grant them access or use other credentials: "
                    f"{CREDENTIALS_HINT}") from err
            raise S3AccessError(f"{where} failed a request on {uri!r}: {err}") from err

    def list_prefix(self, bucket: str, prefix: str) -> List[Tuple[str, str]]:
        """Every object whose name starts with `prefix`: (name, what identifies its content)."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                         Prefix=prefix)
        return [(entry["Key"], _identity(entry)) for page in pages
                for entry in page.get("Contents", ())]

    def stat(self, bucket: str, key: str) -> Optional[str]:
        """What identifies the object `key`'s content; None if there is no such object.

        A listing, not a HEAD request: its answer names a missing bucket or refused credentials.
        """
        page = self.client().list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        entries = page.get("Contents", ())
        return _identity(entries[0]) if entries and entries[0]["Key"] == key else None

    def download(self, bucket: str, key: str, local_path: str) -> None:
        """Copies the object `key` to `local_path` (in parts, in parallel when large)."""
        self.client().download_file(bucket, key, local_path)

    def upload(self, local_path: str, bucket: str, key: str) -> None:
        """Copies the local file to the object `key` (a multipart upload when large)."""
        self.client().upload_file(local_path, bucket, key)

    def delete(self, bucket: str, key: str) -> None:
        """Deletes the object `key`; one already gone is not an error (S3 answers the same)."""
        self.client().delete_object(Bucket=bucket, Key=key)

    def copy(self, source: Tuple[str, str], bucket: str, key: str) -> None:
        """Copies the object `source` (bucket, key) to `key` in the store (no bytes pass
        here)."""
        self.client().copy({"Bucket": source[0], "Key": source[1]}, bucket, key)


#: `s3://`: AWS's S3, or the store AWS_ENDPOINT_URL(_S3) names.
S3 = S3Store("s3")
#: `minio://`: Kubeflow Pipelines' store, or the one AWS_ENDPOINT_URL(_S3) names.
MINIO = S3Store("minio", default_endpoint=MINIO_ENDPOINT)
