"""What every replica of a cluster job gets to reach an S3 store (`s3://`, `minio://`).

The step reaches the store with the AWS SDKs' variables (`s3_access`); its replicas, in pods
of their own, get the same configuration when the job's work location or its dataset is on
S3: the endpoint and region variables as values, copied from the step's environment (only
those set), and the keys by reference to a Secret (`env[].valueFrom.secretKeyRef`, optional:
a namespace without it still runs), so no key is ever written into a job. Pure: the step's
environment is an argument.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from kfdist.components.common.kfp_object_store import SECRET_KEYS
from kfdist.components.common.s3_access import ENDPOINT_VARIABLES, REGION_VARIABLES

#: The schemes of the S3 store, as URIs spell them.
S3_SCHEMES = ("s3://", "minio://")
#: The step's variables a replica gets as values when it uses the S3 store.
COPIED_VARIABLES = (*ENDPOINT_VARIABLES, *REGION_VARIABLES)


def uses_s3(locations: Sequence[Optional[str]]) -> bool:
    """Returns whether any of `locations` (work location, dataset; None: absent) is on S3."""
    return any(location and location.startswith(S3_SCHEMES) for location in locations)


def secret_key_env(secret: str) -> Tuple[Dict[str, Any], ...]:
    """The `env` entries giving a container the store's keys from the Secret `secret`
    (`kfp_object_store.SECRET_KEYS`), optional ones."""
    return tuple({"name": variable,
                  "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": True}}}
                 for variable, key in SECRET_KEYS.items())


def replica_object_store_env(
        secret: Optional[str], locations: Sequence[Optional[str]], environ: Mapping[str, str],
        taken: Sequence[str] = ()) -> Tuple[Dict[str, str], Tuple[Dict[str, Any], ...]]:
    """The S3 configuration every replica gets.

    Args:
      secret: The Secret holding the store's keys (`object_store_secret`); None: no keys.
      locations: The job's work location and dataset URI; nothing is given unless one is on S3.
      environ: The step's environment, whose endpoint and region variables are copied.
      taken: Variables the replicas already get otherwise (the KFP task's own), left alone.

    Returns:
      The variables given as values (endpoint and region), and the `env` entries of the keys.
    """
    if not uses_s3(locations):
        return {}, ()
    values = {name: environ[name] for name in COPIED_VARIABLES
              if environ.get(name) and name not in taken}
    refs = tuple(entry for entry in secret_key_env(secret) if entry["name"] not in taken) \
        if secret else ()
    return values, refs


def replica_env_entries(secret: Optional[str], locations: Sequence[Optional[str]],
                        environ: Mapping[str, str],
                        taken: Sequence[str] = ()) -> Tuple[Dict[str, Any], ...]:
    """`replica_object_store_env` as a container's `env` entries: the values, then the keys."""
    values, refs = replica_object_store_env(secret, locations, environ, taken)
    return tuple({"name": k, "value": v} for k, v in values.items()) + refs
