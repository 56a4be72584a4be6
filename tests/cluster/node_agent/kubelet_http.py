"""The kubelet port: container logs over HTTPS, which the API server's `pods/log` reads.

`GET /containerLogs/<namespace>/<pod>/<container>` with the query the API server forwards
(`follow`, `tailLines`, `timestamps`, `sinceSeconds`, `previous`, `limitBytes`), streamed from
`podman logs`; `GET /healthz`. Only clients with a certificate of the bed's CA are served.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import parse_qs, urlsplit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # the agent's log stays about pods
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path == "/healthz":
            return self._send(200, b"ok")
        parts = url.path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._send(404, b"not found")
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        target = self.server.find(parts[1], parts[2], parts[3],  # type: ignore[attr-defined]
                                  query.get("previous") == "true")
        if target is None:  # the kubelet's answer: 400 (a 404 would say the pod is gone)
            return self._send(400, f'container "{parts[3]}" in pod "{parts[2]}" is waiting to '
                                   'start, or has no previous run'.encode())
        argv = [self.server.podman, "logs"]  # type: ignore[attr-defined]
        if query.get("follow") == "true":
            argv.append("--follow")
        if query.get("timestamps") == "true":
            argv.append("--timestamps")
        if "tailLines" in query:
            argv += ["--tail", query["tailLines"]]
        if "sinceSeconds" in query:
            argv += ["--since", f"{query['sinceSeconds']}s"]
        limit = int(query["limitBytes"]) if "limitBytes" in query else None
        self._stream(argv + [target], limit)

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, argv, limit: Optional[int]) -> None:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            while True:
                chunk = process.stdout.readline()
                if not chunk:
                    break
                if limit is not None:
                    chunk = chunk[:max(0, limit - sent)]
                sent += len(chunk)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if limit is not None and sent >= limit:
                    break
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            process.kill()
            process.wait()


class KubeletServer:
    """Serves the kubelet port on 127.0.0.1:`port` until `close`.

    Args:
      port: The port (the Node's `daemonEndpoints.kubeletEndpoint.Port`).
      pki: The bed's certificates (`serving.crt`/`serving.key`, clients checked with `ca.crt`).
      podman: The podman binary.
      find: `find(namespace, pod, container, previous)` → the podman container name, or None.
    """

    def __init__(self, port: int, pki: Path, podman: str, find: Callable):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.podman, self._httpd.find = podman, find  # type: ignore[attr-defined]
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(pki / "serving.crt"), str(pki / "serving.key"))
        context.load_verify_locations(str(pki / "ca.crt"))
        context.verify_mode = ssl.CERT_REQUIRED
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="kubelet-port",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
