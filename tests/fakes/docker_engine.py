"""A Docker API, over real HTTP, that loses each container as Podman 4 does on a busy machine.

It answers the calls kfp.local's DockerRunner makes for one step (ping, version, info, image
inspect and list, container create, inspect, start, logs, list) and plays the race that
Podman's Docker API loses: the container is inspected once after it is created; when the client
inspects it again (docker-py does, to read the log it followed), it has been removed, and the
answer is the 500 Podman gives for a container it is removing (Docker gives a 404, which
kfp.local handles). Every request is recorded as `(method, path)`, and the body of the
container's creation as `created`.

    with FakeDockerEngine(images=[kfdist.RUNTIME_IMAGE]) as engine:
        ... DOCKER_HOST=engine.url kfdist run --runner docker ...
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from typing import List, Optional, Tuple

CONTAINER_ID = "0" * 63 + "1"
LOST = (f"container {CONTAINER_ID} does not exist in database: no such container")


class FakeDockerEngine:
    """The fake engine; use it as a context manager (it serves on a free localhost port)."""

    def __init__(self, images: List[str]):
        self.images = list(images)
        self.requests: List[Tuple[str, str]] = []
        self.created: Optional[dict] = None
        self._inspections = 0
        self._httpd: Optional[http.server.ThreadingHTTPServer] = None

    def __enter__(self) -> "FakeDockerEngine":
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                engine._answer(self, "GET")

            def do_POST(self):
                engine._answer(self, "POST")

            def do_DELETE(self):
                engine._answer(self, "DELETE")

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        """`tcp://127.0.0.1:<port>`, for DOCKER_HOST."""
        return f"tcp://127.0.0.1:{self._httpd.server_address[1]}"

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        sent = handler.rfile.read(length) if length else b""
        path = re.sub(r"^/v[\d.]+", "", handler.path.split("?")[0])
        self.requests.append((method, path))
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
        if path == "/_ping":
            return 200, b"OK"
        if path == "/version":
            return 200, {"ApiVersion": "1.41", "Version": "4.3.1", "MinAPIVersion": "1.24"}
        if path == "/info":
            return 200, {"ServerVersion": "4.3.1", "SecurityOptions": ["name=seccomp"]}
        if method == "GET" and path == "/images/json":
            return 200, [image]
        if method == "GET" and path.startswith("/images/") and path.endswith("/json"):
            return 200, image
        if method == "POST" and path == "/containers/create":
            return 201, {"Id": CONTAINER_ID, "Warnings": []}
        if method == "GET" and path == f"/containers/{CONTAINER_ID}/json":
            self._inspections += 1
            if self._inspections == 1:
                return 200, {"Id": CONTAINER_ID, "Config": {"Tty": False},
                             "State": {"Status": "running"}}
            return 500, {"cause": "no such container", "message": LOST, "response": 500}
        if method == "POST" and path == f"/containers/{CONTAINER_ID}/start":
            return 204, b""
        if method == "GET" and path == f"/containers/{CONTAINER_ID}/logs":
            return 200, b""
        if method == "GET" and path == "/containers/json":
            return 200, []
        return 404, {"message": f"no route {method} {path}"}
