"""The one module of kfdist that talks to the Kubernetes API.

`KubeApi` wraps the official `kubernetes` client (custom objects for jobs,
core v1 for pods, logs and events). Everything it returns is plain data in the
API's own camelCase shape; every failure is a `KubeApiError` whose subclass
says what to do about it (retry, re-list, install an operator, fix RBAC).
The client is passed in (tests point one at a local HTTP server) or loaded
from the pod's service account, else from kubeconfig.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kfdist.components.common.errors import KfdistError
from kfdist.components.train_distributed.kubernetes.build.job_kinds import JobKind
from kfdist.components.train_distributed.kubernetes.client import kube_errors as errors
from kfdist.components.train_distributed.kubernetes.client.api_types import (  # noqa: F401  (re-exported)
    OwnerRef, WatchEvent)
from kfdist.components.train_distributed.kubernetes.client.pod_identity import (
    POD_NAME_ENV, POD_UID_ENV, kubeconfig_location, own_namespace)

_CALL_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for one ordinary call
_WATCH_IDLE_MARGIN = 10.0  # read timeout beyond a watch's own server-side timeout


class KubeApi:
    """Typed access to the jobs, pods, logs and events kfdist needs."""

    def __init__(self, api_client: k8s.ApiClient):
        """Wraps a configured client.

        Args:
          api_client: A `kubernetes.client.ApiClient` pointed at the cluster.
        """
        self._custom = k8s.CustomObjectsApi(api_client)
        self._core = k8s.CoreV1Api(api_client)
        self._extensions = k8s.ApiextensionsV1Api(api_client)

    @classmethod
    def from_environment(cls) -> "KubeApi":
        """The in-cluster service account, else the kubeconfig `KUBECONFIG` names now (a
        `:`-separated list merged, as kubectl does) or `~/.kube/config`, into this client's
        own configuration (the `kubernetes` package reads `KUBECONFIG` once, at import)."""
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(
                config_file=kubeconfig_location(), client_configuration=configuration)
        return cls(k8s.ApiClient(configuration))

    @classmethod
    def from_environment_if_any(cls) -> Optional["KubeApi"]:
        """`from_environment`, or None when there is neither a pod's service account nor a kubeconfig."""
        try:
            return cls.from_environment()
        except (k8s_config.ConfigException, OSError):
            return None

    # What the cluster serves -------------------------------------------------

    def read_crd_schema(self, crd_name: str, version: str) -> Dict[str, Any]:
        """The `openAPIV3Schema` of one version of a CustomResourceDefinition.

        Raises:
          NotFoundError: The CRD is not installed (also where RBAC forbids reading CRDs and the
            API's discovery, open to every account, shows the CRD's group/version not served).
          PermissionDeniedError: RBAC forbids reading it, and its API is served.
        """
        try:
            with _translated("get", "customresourcedefinitions.apiextensions.k8s.io",
                             errors.CLUSTER_SCOPE):
                response = self._extensions.read_custom_resource_definition(
                    crd_name, _preload_content=False, _request_timeout=_CALL_TIMEOUT)
        except errors.PermissionDeniedError:
            group = crd_name.split(".", 1)[1]
            if self._serves(group, version):
                raise
            raise errors.NotFoundError(f"CRD {crd_name} is not installed (the API {group}/"
                                       f"{version} is not served)", 404) from None
        crd = json.loads(response.data)
        for served in crd["spec"]["versions"]:
            if served["name"] == version:
                return served["schema"]["openAPIV3Schema"]
        raise errors.NotFoundError(f"CRD {crd_name} does not serve version {version}", 404)

    def _serves(self, group: str, version: str) -> bool:
        """Whether the API `group/version` is served (discovery: every account may read it)."""
        try:
            with _translated("get", f"/apis/{group}/{version}", errors.CLUSTER_SCOPE):
                self._custom.get_api_resources(group, version, _request_timeout=_CALL_TIMEOUT)
        except errors.NotFoundError:
            return False
        return True

    def get_cluster_training_runtime(self, name: str) -> Dict[str, Any]:
        """A Kubeflow Trainer ClusterTrainingRuntime; raises `NotFoundError` when there is none."""
        with _translated("get", "clustertrainingruntimes.trainer.kubeflow.org", errors.CLUSTER_SCOPE):
            return self._custom.get_cluster_custom_object(
                "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", name,
                _request_timeout=_CALL_TIMEOUT)

    # Jobs (custom resources) ------------------------------------------------

    def create_job(self, kind: JobKind, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
        """Creates a job; raises `AlreadyExistsError` when the name is taken."""
        with _translated("create", kind.crd_name, namespace, kind):
            return self._custom.create_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, body,
                _request_timeout=_CALL_TIMEOUT)

    def get_job(self, kind: JobKind, namespace: str, name: str) -> Dict[str, Any]:
        """Reads a job; raises `NotFoundError` when there is none."""
        with _translated("get", kind.crd_name, namespace, kind):
            return self._custom.get_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name,
                _request_timeout=_CALL_TIMEOUT)

    def patch_job_metadata(self, kind: JobKind, namespace: str, name: str,
                           metadata: Dict[str, Any]) -> Dict[str, Any]:
        """Merge-patches `metadata` (lists such as ownerReferences are replaced whole)."""
        with _translated("patch", kind.crd_name, namespace, kind):
            return self._custom.patch_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, {"metadata": metadata},
                _request_timeout=_CALL_TIMEOUT)

    def delete_job(self, kind: JobKind, namespace: str, name: str, *,
                   propagation: str = "Background", uid: Optional[str] = None) -> None:
        """Deletes a job and (through the garbage collector) its pods.

        Args:
          kind: The job's kind.
          namespace: The job's namespace.
          name: The job's name.
          propagation: `Background` (the object goes at once, pods follow) or
            `Foreground` (the object stays until its pods are gone).
          uid: When given, only delete the object with this uid (a precondition).
        """
        options = k8s.V1DeleteOptions(
            propagation_policy=propagation,
            preconditions=k8s.V1Preconditions(uid=uid) if uid else None)
        with _translated("delete", kind.crd_name, namespace, kind):
            self._custom.delete_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, body=options,
                _request_timeout=_CALL_TIMEOUT)

    def watch_job(self, kind: JobKind, namespace: str, name: str,
                  resource_version: Optional[str], timeout_seconds: int) -> Iterator[WatchEvent]:
        """Streams changes of one job until the server ends the watch.

        Args:
          kind: The job's kind.
          namespace: The job's namespace.
          name: The job's name.
          resource_version: Stream the changes after this one; None: start with
            a synthetic ADDED event for the job as it is now (if it exists),
            then its changes (what a re-list gives, without needing `list`).
          timeout_seconds: The server ends the watch after this long.

        Raises:
          ResourceExpiredError: `resource_version` is older than the server keeps (410).
        """
        with _translated("watch", kind.crd_name, namespace, kind):
            response = self._custom.list_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, watch=True,
                field_selector=f"metadata.name={name}", resource_version=resource_version,
                timeout_seconds=timeout_seconds, _preload_content=False,
                _request_timeout=(_CALL_TIMEOUT[0], timeout_seconds + _WATCH_IDLE_MARGIN))
        yield from _watch_events(response, "watch", kind.crd_name, namespace, kind)

    # Pods, logs, events -----------------------------------------------------

    def list_pods(self, namespace: str, label_selector: str) -> Tuple[List[Dict[str, Any]], str]:
        """Returns the pods matching `label_selector` and the list's resourceVersion."""
        with _translated("list", "pods", namespace):
            response = self._core.list_namespaced_pod(
                namespace, label_selector=label_selector, _preload_content=False,
                _request_timeout=_CALL_TIMEOUT)
            listing = json.loads(response.data)
        return listing.get("items") or [], listing["metadata"]["resourceVersion"]

    def watch_pods(self, namespace: str, label_selector: str, resource_version: str,
                   timeout_seconds: int) -> Iterator[WatchEvent]:
        """Streams changes of the selected pods after `resource_version`."""
        with _translated("watch", "pods", namespace):
            response = self._core.list_namespaced_pod(
                namespace, label_selector=label_selector, watch=True,
                resource_version=resource_version, timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=(_CALL_TIMEOUT[0], timeout_seconds + _WATCH_IDLE_MARGIN))
        yield from _watch_events(response, "watch", "pods", namespace)

    def get_pod(self, namespace: str, name: str) -> Dict[str, Any]:
        """Reads one pod as plain data."""
        with _translated("get", "pods", namespace):
            response = self._core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=_CALL_TIMEOUT)
            return json.loads(response.data)

    def stream_pod_log(self, namespace: str, name: str, container: str, *,
                       follow: bool = True) -> Iterator[str]:
        """Reads a container's log from its start, one line at a time.

        Args:
          namespace: The pod's namespace.
          name: The pod's name.
          container: The container's name.
          follow: Keep streaming until the container stops (else: what is there now).

        A dropped connection raises `TransientApiError`; only whole lines are
        yielded until the stream ends cleanly.
        """
        with _translated("get", "pods/log", namespace):
            response = self._core.read_namespaced_pod_log(
                name, namespace, container=container, follow=follow, _preload_content=False,
                _request_timeout=(_CALL_TIMEOUT[0], None if follow else _CALL_TIMEOUT[1]))
        with _translated("get", "pods/log", namespace):
            yield from _lines(response, final_partial=True)

    def list_events(self, namespace: str, involved_kind: str,
                    involved_name: str) -> List[Dict[str, Any]]:
        """Events about one object (e.g. `FailedScheduling` for a pod), oldest first."""
        selector = f"involvedObject.kind={involved_kind},involvedObject.name={involved_name}"
        with _translated("list", "events", namespace):
            response = self._core.list_namespaced_event(
                namespace, field_selector=selector, _preload_content=False,
                _request_timeout=_CALL_TIMEOUT)
            return json.loads(response.data).get("items") or []

    def read_own_pod_reference(self) -> Optional[OwnerRef]:
        """Who this process runs as: `KFP_POD_NAME`/`KFP_POD_UID`, else HOSTNAME + get.

        Returns:
          The step pod as an owner, or None outside a cluster.
        """
        namespace = own_namespace()
        name = os.environ.get(POD_NAME_ENV) or os.environ.get("HOSTNAME")
        if not namespace or not name:
            return None
        uid = os.environ.get(POD_UID_ENV)
        if not uid:
            try:
                uid = self.get_pod(namespace, name)["metadata"]["uid"]
            except errors.NotFoundError:
                return None
        return OwnerRef(namespace=namespace, name=name, uid=uid)


def _watch_events(response, verb: str, resource: str, namespace: str,
                  kind: Optional[JobKind] = None) -> Iterator[WatchEvent]:
    with _translated(verb, resource, namespace, kind):
        for line in _lines(response, final_partial=False):
            event = json.loads(line)
            if event["type"] == "ERROR":
                raise errors.from_status(event["object"], verb, resource, namespace, kind)
            yield WatchEvent(event["type"], event["object"])


def _lines(response, *, final_partial: bool) -> Iterator[str]:
    """Splits a streamed body into lines as chunks arrive; always releases it."""
    buffer = b""
    complete = False
    try:
        for chunk in response.stream(amt=None, decode_content=False):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace")
        complete = True
        if final_partial and buffer:
            yield buffer.decode("utf-8", errors="replace")
    finally:
        if not complete:  # never hand a half-read connection back to the pool
            response.close()
        response.release_conn()


@contextlib.contextmanager
def _translated(verb: str, resource: str, namespace: str, kind: Optional[JobKind] = None):
    """Turns client and transport exceptions into `KubeApiError` subclasses."""
    try:
        yield
    except KfdistError:
        raise
    except k8s.ApiException as e:
        raise errors.from_api_exception(e, verb, resource, namespace, kind) from e
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise errors.TransientApiError(
            f"{verb} {resource} in namespace {namespace}: connection to the API server failed: {e}"
        ) from e
