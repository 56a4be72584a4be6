"""The node agent's calls to the API server: JSON in and out over the `kubernetes` client's
connection (its kubeconfig handling), with the patch types the kubelet uses."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, Optional

import kubernetes
import urllib3


class ApiError(RuntimeError):
    """A non-2xx answer; `status` is the HTTP status."""

    def __init__(self, status: int, text: str):
        super().__init__(f"{status}: {text[:300]}")
        self.status = status


class Kube:
    """A JSON client of one API server."""

    def __init__(self, kubeconfig: str):
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=kubeconfig,
                                           client_configuration=configuration)
        self._client = kubernetes.client.ApiClient(configuration)

    def request(self, method: str, path: str, body: Any = None, query: Optional[Dict] = None,
                content_type: str = "application/json", stream: bool = False,
                timeout: float = 30) -> Any:
        """One request; the decoded JSON body (or, with `stream`, the open response)."""
        try:
            response = self._client.call_api(
                path, method, query_params=list((query or {}).items()),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body, auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=None if stream else timeout)[0]
        except kubernetes.client.exceptions.ApiException as error:
            raise ApiError(error.status, error.body or str(error.reason)) from None
        except urllib3.exceptions.HTTPError as error:  # no answer: a timeout, a refused connection
            raise ApiError(0, str(error)) from None
        if stream:
            return response
        return json.loads(response.data or b"null")

    def get(self, path: str) -> Any:
        """GET `path` (an object or a list)."""
        return self.request("GET", path)

    def create(self, path: str, body: Dict) -> Any:
        """POST `body` to the collection (or subresource) at `path`."""
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: Dict) -> Any:
        """A JSON merge patch of `path` (lists in `body` replace the object's)."""
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, body: Optional[Dict] = None) -> Any:
        """DELETE `path` with DeleteOptions `body`."""
        return self.request("DELETE", path, body)

    def watch(self, path: str, resource_version: str, timeout_s: int = 300) -> Iterator[Dict]:
        """Watch events of a collection from `resource_version` (ends when the server closes)."""
        response = self.request("GET", path, query={
            "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_s)}, stream=True)
        buffer = b""
        try:
            for chunk in response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            response.release_conn()
