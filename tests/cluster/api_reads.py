"""Reads of a bed's objects straight from its API server, as the administrator: what
`kubectl get KIND [NAME] [-l SELECTOR] -o json` and `kubectl logs` print, without starting
kubectl.

The tests poll objects often (a job's conditions, a pod's phase), and each kubectl start took
about 0.1 CPU-second (its discovery of every group the operators and Kubeflow Pipelines serve):
over a run, minutes of CPU that the replicas under test wanted. Kinds are resolved as kubectl
resolves a lower-case kind (`pod`, `tfjob`), from the API server's discovery, read once per bed
and again when a kind is not found (a test installed its CRD since).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, Optional, Tuple

#: {bed directory: {lower-case kind, plural or singular name: (group-version path, plural,
#: namespaced)}}.
_resources: Dict[Path, Dict[str, Tuple[str, str, bool]]] = {}
#: {bed directory: the TLS context of its CA and administrator's certificate}.
_contexts: Dict[Path, ssl.SSLContext] = {}


class NotFound(LookupError):
    """The API server has no such object (404), or no such kind."""


def _read(layout, path: str) -> bytes:
    context = _contexts.get(layout.root)
    if context is None:
        context = _contexts[layout.root] = ssl.create_default_context(
            cafile=str(layout.pki / "ca.crt"))
        context.load_cert_chain(str(layout.pki / "admin.crt"), str(layout.pki / "admin.key"))
    try:
        with urllib.request.urlopen(layout.api_url + path, context=context, timeout=30) as answer:
            return answer.read()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise NotFound(path) from None
        raise


def _get(layout, path: str) -> dict:
    return json.loads(_read(layout, path))


def _discover(layout) -> Dict[str, Tuple[str, str, bool]]:
    """Every resource the API server serves, by the names kubectl takes for it: each group's
    preferred version first, then its others (a resource only they serve, as `mpijobs` in
    kubeflow.org/v2beta1 beside the group's preferred v1); the first group that serves a name
    wins, as in kubectl's order."""
    found: Dict[str, Tuple[str, str, bool]] = {}
    bases = ["/api/v1"] + [
        f"/apis/{version}" for group in _get(layout, "/apis")["groups"]
        for version in dict.fromkeys([group["preferredVersion"]["groupVersion"],
                                      *(v["groupVersion"] for v in group["versions"])])]
    for base in bases:
        for resource in _get(layout, base)["resources"]:
            if "/" in resource["name"]:  # a subresource (pods/log)
                continue
            entry = (base, resource["name"], resource["namespaced"])
            for name in (resource["kind"].lower(), resource["name"],
                         resource.get("singularName") or ""):
                if name:
                    found.setdefault(name, entry)
    return found


def _resource(layout, kind: str) -> Tuple[str, str, bool]:
    known = _resources.get(layout.root)
    if known is None or kind not in known:
        known = _resources[layout.root] = _discover(layout)
    if kind not in known:
        raise NotFound(f"the server doesn't have a resource type {kind!r}")
    return known[kind]


def get(layout, kind: str, namespace: Optional[str], name: str = "", selector: str = "") -> dict:
    """The object `name` of `kind` (in `namespace` when the kind is namespaced), or without a
    name the list of them (those whose labels match `selector`, `kubectl get -l`'s syntax, when
    given), as `kubectl get -o json` gives it (each item with its kind and apiVersion, no object
    with its managedFields). Raises `NotFound` when there is no such object or kind."""
    base, plural, namespaced = _resource(layout, kind)
    path = f"{base}/namespaces/{namespace}/{plural}" if namespaced and namespace else \
        f"{base}/{plural}"
    if name:
        path = f"{path}/{name}"
    elif selector:
        path = f"{path}?{urllib.parse.urlencode({'labelSelector': selector})}"
    found = _get(layout, path)
    if name:
        found.get("metadata", {}).pop("managedFields", None)  # kubectl leaves them out
        return found
    item_kind = found.get("kind", "").removesuffix("List")
    for item in found.get("items", []):
        item.setdefault("kind", item_kind)
        item.setdefault("apiVersion", found.get("apiVersion"))
        item.get("metadata", {}).pop("managedFields", None)
    return found


def log(layout, namespace: str, pod: str, container: str) -> str:
    """The log of `container` of `pod`, as `kubectl logs` prints it; empty when the pod or its
    container's log is not there (yet)."""
    path = (f"/api/v1/namespaces/{namespace}/pods/{pod}/log?"
            f"{urllib.parse.urlencode({'container': container})}")
    try:
        return _read(layout, path).decode(errors="replace")
    except (NotFound, urllib.error.HTTPError):  # 400 while the container is waiting to start
        return ""
