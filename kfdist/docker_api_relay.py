"""A relay in front of the Podman service kfdist starts, so steps' containers behave as on Docker.

kfp.local's DockerRunner runs each step with `auto_remove=True`, follows its log, then waits for
its exit status. Podman 4 sends a followed log's response headers only with the container's
first output, removes an auto-removed container (and its log file) as soon as it exits, and
answers a call about a container it is removing with `500 ... no such container` where Docker
answers 404. So on a busy machine a quick step lost its log lines, or its inspection got the
500, which DockerRunner does not handle: the run failed after the step had done its work.

The relay passes each request and its response through, one request per connection (a request
body must come with its length, as docker-py sends them; a chunked upload, such as an image
build's, is refused with a 501, and attaching to a container is not relayed), with two
changes: a container created with auto-removal is created without it, and removed (with its
anonymous volumes, as auto-removal does) once a client has read its exit status; and a 500 that
says the container does not exist is Docker's 404. Containers no one waited for are removed by
the run's own clean-up (`docker_run`).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import socket
import socketserver
import threading
from typing import Optional, Set

#: Podman's words for a container it no longer has (mid-removal, it answers them with a 500).
LOST_CONTAINER = b"no such container"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}
_CREATE = re.compile(r"^(/v[\d.]+)?/containers/create$")
_WAIT = re.compile(r"^(?P<prefix>(/v[\d.]+)?)/containers/(?P<id>[^/]+)/wait$")


class _UnixConnection(http.client.HTTPConnection):
    """An HTTP connection over a unix socket."""

    def __init__(self, path: str):
        super().__init__("localhost")
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def _without_auto_removal(body: Optional[bytes]) -> Optional[bytes]:
    """The body of a container's creation with auto-removal off; None when it was off already."""
    spec = json.loads(body or b"{}")
    host_config = spec.get("HostConfig") or {}
    if not host_config.get("AutoRemove"):
        return None
    host_config["AutoRemove"] = False
    return json.dumps(spec).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the response ends with the connection: no re-framing

    def log_message(self, *args) -> None:  # the engine's own log says what happened
        pass

    def _relay(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.send_error(501, "kfdist's relay takes request bodies with a Content-Length only")
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        path = self.path.split("?", 1)[0]
        created = None
        if self.command == "POST" and _CREATE.match(path):
            created = _without_auto_removal(body)
            body = created or body
        upstream = _UnixConnection(self.server.upstream)
        try:
            upstream.request(self.command, self.path, body=body, headers={
                k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP})
            response = upstream.getresponse()
            status, reason, whole = response.status, response.reason, None
            if status == 500 or (created and status == 201):
                whole = response.read()
            if status == 500 and LOST_CONTAINER in whole:
                status, reason = 404, "Not Found"
            elif created and status == 201:
                self.server.auto_removed.add(json.loads(whole)["Id"])
            self._respond(response, status, reason, whole)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client (or the engine) went away; nothing is waiting for the rest
        finally:
            upstream.close()
        waited = _WAIT.match(path) if self.command == "POST" else None
        if waited and status == 200 and waited["id"] in self.server.auto_removed:
            self.server.auto_removed.discard(waited["id"])
            self._remove(f"{waited['prefix']}/containers/{waited['id']}?force=true&v=true")

    def _respond(self, response, status: int, reason: str, whole: Optional[bytes]) -> None:
        self.send_response_only(status, reason)
        for key, value in response.getheaders():
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        if whole is not None:
            self.send_header("Content-Length", str(len(whole)))
        self.end_headers()
        if whole is not None:
            self.wfile.write(whole)
            return
        while chunk := response.read1(65536):  # a followed log streams until the end
            self.wfile.write(chunk)
            self.wfile.flush()

    def _remove(self, target: str) -> None:
        upstream = _UnixConnection(self.server.upstream)
        try:
            upstream.request("DELETE", target)
            upstream.getresponse().read()
        finally:
            upstream.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, socket_path: str, upstream: str):
        super().__init__(socket_path, _Handler)
        self.upstream = upstream
        #: Ids of the containers created here without the auto-removal their client asked for.
        self.auto_removed: Set[str] = set()

    def handle_error(self, request, client_address) -> None:
        """A request the engine did not answer (it stopped) ends its connection unanswered;
        the client reports that, and nothing is printed here."""


class DockerApiRelay:
    """Serves `socket_path`, relaying to the Docker API at the unix socket `upstream`."""

    def __init__(self, upstream: str, socket_path: str):
        """Starts serving.

        Args:
          upstream: Path of the engine's unix socket.
          socket_path: Path of the relay's own socket (created; removed by `close`).
        """
        self.socket_path = socket_path
        self._server = _Server(socket_path, upstream)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()

    @property
    def url(self) -> str:
        """`unix://<socket_path>`, for DOCKER_HOST."""
        return f"unix://{self.socket_path}"

    def close(self) -> None:
        """Stops serving; requests in flight end with the engine."""
        self._server.shutdown()
        self._server.server_close()
        if os.path.exists(self.socket_path):
            os.remove(self.socket_path)
