"""Kubernetes API failures as typed kfdist errors with messages that say what to do.

Pure: it reads the status code and the apiserver's `Status` body of a failed
call; `kube_api` (the one module that imports `kubernetes`) raises these.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Optional

from kfdist.components.common.errors import KfdistError
from kfdist.components.train_distributed.kubernetes.build.job_kinds import JobKind

#: The RBAC manifest (kustomize base) and Role a pipeline runner needs.
RBAC_MANIFEST = "manifests/base/rbac.yaml"
RBAC_ROLE = "kfdist-pipeline-runner"
#: Where a call reads a cluster-scoped object (the TrainJob CRD, a ClusterTrainingRuntime).
CLUSTER_SCOPE = "(cluster)"
#: What lets every service account read those objects by name (`manifests/runtimes`).
CLUSTER_READER_MANIFEST = "manifests/runtimes/trainer-reader.yaml"
CLUSTER_READER_ROLE = "kfdist-trainer-reader"

_USER_IN_MESSAGE = re.compile(r'User "([^"]*)"')
_RUNTIME_NOT_FOUND = re.compile(r"runtime '[^']*' not found")


class KubeApiError(KfdistError):
    """A Kubernetes API call failed.

    Attributes:
      status: The HTTP status code, or None when no response came back.
    """

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class TransientApiError(KubeApiError):
    """The server or the connection failed in a way worth retrying (5xx, 429, dropped)."""


class AlreadyExistsError(KubeApiError):
    """An object with that name exists already (409)."""


class ConflictError(KubeApiError):
    """A precondition (e.g. uid on delete) did not hold (409 Conflict)."""


class NotFoundError(KubeApiError):
    """The named object does not exist (404 with a NotFound Status)."""


class ResourceExpiredError(KubeApiError):
    """A watch asked for a resourceVersion the server no longer keeps (410 Gone): re-list."""


class CrdNotInstalledError(KubeApiError):
    """The job kind is not served: its CRD (and so its operator) is not installed."""


class PermissionDeniedError(KubeApiError):
    """RBAC forbids the call (403)."""


class AdmissionDeniedError(KubeApiError):
    """An admission webhook refused the object (e.g. Trainer's: its runtime is not installed)."""


#: How kfdist's Trainer runtimes are installed (manifests/runtimes).
RUNTIMES_INSTALL = "kubectl apply --server-side -k manifests/runtimes"


def status_body(body: Any) -> Dict[str, Any]:
    """Parses a response body as a `Status` object; {} when it is not one."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, dict):
        return body
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) and parsed.get("kind") == "Status" else {}


def from_api_exception(exc: Any, verb: str, resource: str, namespace: str,
                       kind: Optional[JobKind] = None) -> KubeApiError:
    """Maps a `kubernetes.client.ApiException` (duck-typed) to a `KubeApiError`.

    Args:
      exc: The exception: `.status`, `.reason`, `.body`.
      verb: What was attempted (`create`, `get`, `list`, `watch`, `delete`, ...).
      resource: The resource as RBAC names it (`tfjobs.kubeflow.org`, `pods/log`).
      namespace: The namespace of the call.
      kind: The custom resource kind, for calls on jobs.
    """
    status = status_body(exc.body)
    if not status:
        status = {"code": exc.status, "message": _plain_text(exc.body) or exc.reason or ""}
    status.setdefault("code", exc.status)
    return from_status(status, verb, resource, namespace, kind)


def from_status(status: Dict[str, Any], verb: str, resource: str, namespace: str,
                kind: Optional[JobKind] = None) -> KubeApiError:
    """Maps an apiserver `Status` (from a response or a watch ERROR event) to an error."""
    code = status.get("code")
    message = status.get("message") or status.get("reason") or "no message"
    details = status.get("details") or {}
    where = f"{verb} {resource} in namespace {namespace}"
    if code == 403 and message.startswith("admission webhook"):
        hint = ""
        # Trainer v2.3's webhook words it two ways: "... TrainingRuntime must be created ..."
        # and "runtime '<name>' not found" (both seen from the same controller).
        if ("trainingruntime must be created" in message.lower()
                or _RUNTIME_NOT_FOUND.search(message)):
            hint = f"; install kfdist's Kubeflow Trainer runtimes: {RUNTIMES_INSTALL}"
        return AdmissionDeniedError(f"{where} was refused: {message}{hint}", code)
    if code == 403:
        return PermissionDeniedError(_forbidden_message(verb, resource, namespace, message), code)
    if code == 404:
        if details.get("kind") == "namespaces":
            return NotFoundError(f"{where}: namespace {namespace} does not exist ({message})", code)
        if kind is not None and details.get("kind") not in (kind.plural, kind.kind.lower()):
            return CrdNotInstalledError(crd_missing_message(kind), code)
        return NotFoundError(f"{where}: {message}", code)
    if code == 409:
        error = AlreadyExistsError if status.get("reason") == "AlreadyExists" else ConflictError
        return error(f"{where}: {message}", code)
    if code == 410:
        return ResourceExpiredError(f"{where}: {message}", code)
    if code in (429,) or (isinstance(code, int) and code >= 500):
        return TransientApiError(f"{where}: the API server answered {code}: {message}", code)
    return KubeApiError(f"{where} failed ({code}): {message}", code)


def crd_missing_message(kind: JobKind) -> str:
    """What to tell a user whose cluster does not serve `kind`."""
    return (f"the {kind.kind} CRD ({kind.crd_name}, {kind.api_version}) is not installed: "
            f"install the {kind.operator}: {kind.install_hint}")


def _forbidden_message(verb: str, resource: str, namespace: str, server_message: str) -> str:
    match = _USER_IN_MESSAGE.search(server_message)
    who = match.group(1) if match else "the step's service account"
    if namespace == CLUSTER_SCOPE:
        return (f"RBAC denied {verb} {resource} at the cluster scope for {who}: apply "
                f"{CLUSTER_READER_MANIFEST} (ClusterRole {CLUSTER_READER_ROLE}, bound to every "
                f"service account), which names the objects kfdist reads "
                f"(API server said: {server_message})")
    return (f"RBAC denied {verb} {resource} in namespace {namespace} for {who}: "
            f"apply {RBAC_MANIFEST} (Role {RBAC_ROLE}) and bind it to that service account "
            f"(API server said: {server_message})")


def _plain_text(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    return body.strip() if isinstance(body, str) else ""
