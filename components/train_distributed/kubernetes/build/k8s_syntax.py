"""Kubernetes syntax rules kfdist checks before it creates anything.

Pure predicates and parsers mirroring `k8s.io/apimachinery/pkg/util/validation`
(DNS-1123/1035 names, label keys and values, environment variable names),
`resource.Quantity` and the container image reference grammar. A job that
breaks one of them is rejected by the API server or, worse, accepted and then
stuck (a pod that can never be created), so `ClusterJobSpec.validate` calls
these first.
"""

from __future__ import annotations

import decimal
import hashlib
import re
from typing import Optional

#: Longest DNS label: names of pods, services, namespaces, label values.
DNS_LABEL_MAX = 63
#: Longest DNS subdomain: names of most other objects, label-key prefixes.
DNS_SUBDOMAIN_MAX = 253

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
# The pattern of `resource.Quantity` in every CRD schema (see shared/reference/crds).
_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": "1e-9", "u": "1e-6", "m": "1e-3", "": "1", "k": "1e3", "M": "1e6",
            "G": "1e9", "T": "1e12", "P": "1e15", "E": "1e18"}
# Image reference: [host[:port]/]path[:tag][@digest] (distribution/reference grammar).
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"^(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$", re.ASCII)
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")


def is_dns1123_label(value: object) -> bool:
    """Whether `value` is a DNS-1123 label (namespaces, volume names)."""
    return isinstance(value, str) and len(value) <= DNS_LABEL_MAX and bool(_DNS1123_LABEL.fullmatch(value))


def is_dns1035_label(value: object) -> bool:
    """Whether `value` is a DNS-1035 label: a DNS-1123 label that starts with a letter.

    The Training Operator's TFJob webhook and the MPI Operator require job
    names of this form (services are named after them).
    """
    return isinstance(value, str) and len(value) <= DNS_LABEL_MAX and bool(_DNS1035_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: object) -> bool:
    """Whether `value` is a DNS-1123 subdomain (service accounts, secrets, PVCs)."""
    return (isinstance(value, str) and 0 < len(value) <= DNS_SUBDOMAIN_MAX
            and all(_DNS1123_LABEL.fullmatch(part) for part in value.split(".")))


def label_key_error(key: object) -> Optional[str]:
    """Why `key` is not a valid label or annotation key, or None if it is.

    Args:
      key: `[prefix/]name`: the prefix a DNS subdomain, the name at most 63
        alphanumerics, `-`, `_` or `.`, starting and ending alphanumeric.
    """
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    prefix, _, name = key.rpartition("/")
    if "/" in key and not is_dns1123_subdomain(prefix):
        return f"prefix {prefix!r} must be a DNS subdomain (lower-case, e.g. example.com)"
    if len(name) > DNS_LABEL_MAX or not _LABEL_NAME.fullmatch(name):
        return (f"name {name!r} must be at most 63 characters: alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric")
    return None


def is_label_value(value: object) -> bool:
    """Whether `value` is a valid label value (empty, or a label name of at most 63 characters)."""
    return isinstance(value, str) and (value == "" or (len(value) <= DNS_LABEL_MAX
                                                       and bool(_LABEL_NAME.fullmatch(value))))


def to_label_value(text: str) -> str:
    """`text` as a valid label value: itself if valid, else a readable slug plus a hash.

    Deterministic, so the same run id or task name always labels the same way.
    """
    if is_label_value(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:DNS_LABEL_MAX - 9].strip("-_.")
    return f"{slug}-{digest}" if slug else digest


def is_env_name(value: object) -> bool:
    """Whether `value` is a valid container environment variable name."""
    return isinstance(value, str) and bool(_ENV_NAME.fullmatch(value))


def parse_quantity(value: object) -> Optional[decimal.Decimal]:
    """Parses a Kubernetes resource quantity (`500m`, `2`, `1.5Gi`, `1e3`).

    Args:
      value: The quantity as a string.

    Returns:
      Its value (cores or bytes) as a Decimal, or None if `value` is not a quantity.
    """
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        return None
    match = re.match(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$", value)
    number, suffix = decimal.Decimal(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * decimal.Decimal(_DECIMAL[suffix])
    return number * decimal.Decimal(10) ** decimal.Decimal(suffix[1:])


def image_error(image: object) -> Optional[str]:
    """Why `image` is not a pinned container image reference, or None if it is.

    A pinned reference names an explicit tag other than `latest`, or a digest
    (`@sha256:...`); `:latest` and untagged images change under a running
    pipeline and make retries train different code.
    """
    if not isinstance(image, str) or not image:
        return "must be a non-empty image reference such as gcr.io/project/trainer:1.2.0"
    reference, at, digest = image.partition("@")
    first, slash, rest = reference.partition("/")
    # As in Docker: the first component is a registry host only if it looks like one.
    has_host = bool(slash) and ("." in first or ":" in first or first == "localhost" or first.startswith("["))
    host, path = (first, rest) if has_host else (None, reference)
    repository, colon, tag = path.rpartition(":") if ":" in path else (path, "", "")
    valid = ((host is None or _HOST.fullmatch(host)) and _REPOSITORY.fullmatch(repository)
             and (not colon or _TAG.fullmatch(tag)) and (not at or _DIGEST.fullmatch(digest)))
    if not valid:
        return "is not a valid image reference ([registry/]repository[:tag][@sha256:digest])"
    if at:
        return None
    if not colon:
        return "has no tag: pin a version, e.g. ':1.2.0', or a digest '@sha256:...'"
    if tag == "latest":
        return "is tagged ':latest': pin a version, e.g. ':1.2.0', or a digest '@sha256:...'"
    return None
