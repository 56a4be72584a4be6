"""A Docker API, over real HTTP, that removes containers as Podman 4 does on a busy machine.

It answers the calls kfp.local's DockerRunner makes for one step (ping, version, info, image
inspect and list, container create, inspect, start, logs, wait, remove, list) for one
container, `CONTAINER_ID`, which exits at once with status 0. Created with auto-removal, it is
being removed when it is inspected a second time (docker-py does, to read the log it followed),
and the answer is the 500 Podman gives for a container it is removing (Docker gives a 404,
which kfp.local handles); after that it is gone (404). Created without, it stays until it is
removed. `lose_next_inspection` makes the next inspection that 500 regardless. Every request is
recorded as `(method, path, query)`, and the body of the container's creation as `created`.

    with FakeDockerEngine(images=[kfdist.RUNTIME_IMAGE]) as engine:
        ... DOCKER_HOST=engine.url kfdist run --runner docker ...
"""

from __future__ import annotations

import http.server
import json
import re
from typing import List, Optional, Tuple

from fakes.http_fake import serve

CONTAINER_ID = "0" * 63 + "1"
LOST = f"container {CONTAINER_ID} does not exist in database: no such container"
_LOST_ANSWER = (500, {"cause": "no such container", "message": LOST, "response": 500})
_GONE_ANSWER = (404, {"cause": "no such container", "message": "no such container",
                      "response": 404})


class FakeDockerEngine:
    """The fake engine; use it as a context manager (it serves a free localhost port, or a unix
    socket)."""

    def __init__(self, images: List[str], unix_socket: Optional[str] = None):
        """Args:
          images: The image references the engine has.
          unix_socket: Serve this unix socket instead of a localhost port.
        """
        self.images = list(images)
        self.unix_socket = unix_socket
        self.requests: List[Tuple[str, str, str]] = []
        self.created: Optional[dict] = None
        self.removed = False
        self.lose_next_inspection = False
        self._inspections = 0
        self._httpd = None

    def __enter__(self) -> "FakeDockerEngine":
        self._httpd = serve(self._answer, self.unix_socket)
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        """`tcp://127.0.0.1:<port>` or `unix://<socket>`, for DOCKER_HOST."""
        if self.unix_socket:
            return f"unix://{self.unix_socket}"
        return f"tcp://127.0.0.1:{self._httpd.server_address[1]}"

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        sent = handler.rfile.read(length) if length else b""
        path, _, query = handler.path.partition("?")
        path = re.sub(r"^/v[\d.]+", "", path)
        self.requests.append((method, path, query))
        if path == "/containers/create":
            self.created = json.loads(sent)
        status, body = self._route(method, path)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json" if not isinstance(
            body, bytes) else "application/vnd.docker.raw-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method: str, path: str):
        image = {"Id": "sha256:" + "a" * 64, "RepoTags": self.images, "RepoDigests": []}
        simple = {("GET", "/_ping"): (200, b"OK"),
                  ("GET", "/version"): (200, {"ApiVersion": "1.41", "Version": "4.3.1",
                                              "MinAPIVersion": "1.24"}),
                  ("GET", "/info"): (200, {"ServerVersion": "4.3.1",
                                           "SecurityOptions": ["name=seccomp"]}),
                  ("GET", "/images/json"): (200, [image]),
                  ("GET", "/containers/json"): (200, []),
                  ("POST", "/containers/create"): (201, {"Id": CONTAINER_ID, "Warnings": []})}
        if (method, path) in simple:
            return simple[(method, path)]
        if method == "GET" and path.startswith("/images/") and path.endswith("/json"):
            return 200, image
        if not path.startswith(f"/containers/{CONTAINER_ID}"):
            return 404, {"message": f"no route {method} {path}"}
        return self._container(method, path[len(f"/containers/{CONTAINER_ID}"):])

    def _container(self, method: str, call: str):
        if self.removed:
            return _GONE_ANSWER
        if method == "GET" and call == "/json":
            self._inspections += 1
            auto_removed = (self.created or {}).get("HostConfig", {}).get("AutoRemove")
            if self.lose_next_inspection or (auto_removed and self._inspections > 1):
                self.lose_next_inspection = False
                self.removed = bool(auto_removed)
                return _LOST_ANSWER
            return 200, {"Id": CONTAINER_ID, "Config": {"Tty": False},
                         "State": {"Status": "exited" if self._inspections > 1 else "running",
                                   "ExitCode": 0}}
        answers = {("POST", "/start"): (204, b""), ("GET", "/logs"): (200, b""),
                   ("POST", "/wait"): (200, {"StatusCode": 0, "Error": None})}
        if method == "DELETE" and call == "":
            self.removed = True
            return 204, b""
        return answers.get((method, call), (404, {"message": f"no route {method} {call}"}))
