"""A stateful Kubernetes API server over real HTTP, for the real `kubernetes` client.

Kept only for faults the real API server (tests/cluster/) cannot produce on demand: 5xx
bursts, dropped watches, 410 Gone at a chosen moment, a log stream cut midway. Every other
cluster claim belongs on the real control plane.

Serves, on 127.0.0.1, TFJobs (kubeflow.org/v1), MPIJobs (kubeflow.org/v2beta1),
TrainJobs (trainer.kubeflow.org/v1alpha1), JobSets, Jobs, pods (with the `log`
subresource) and events: create, get, list (label and field selectors), watch
(chunked newline-delimited events from a resourceVersion, 410 Gone for
compacted history, timeoutSeconds), merge-patch (the `status` subresource apart
from the rest, as for a CRD that declares it) and delete (with uid
preconditions). Errors use the apiserver's Status bodies and messages. Faults
(5xx bursts, dropped watch and log streams) come from `faults.Faults`; every
request is recorded.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional
from urllib.parse import parse_qsl, urlsplit

import kubernetes

from fakes.kube_server import routes
from fakes.kube_server.faults import Faults, RequestLog
from fakes.kube_server.store import Gone, ObjectStore

SERVED = {("kubeflow.org", "v1", "tfjobs"), ("kubeflow.org", "v2beta1", "mpijobs"),
          ("trainer.kubeflow.org", "v1alpha1", "trainjobs"), ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
          ("batch", "v1", "jobs"), ("", "v1", "pods"), ("", "v1", "events")}
_STREAM_POLL_SECONDS = 0.2


class KubeServer:
    """The server: `store` holds the objects, `faults` the injected trouble, `requests` the log."""

    def __init__(self, retained_events: int = 10_000):
        """Binds a free port on 127.0.0.1 (call `start`, or use as a context manager).

        Args:
          retained_events: How many watch events to keep before compacting.
        """
        self.store = ObjectStore(retained_events)
        self.faults = Faults()
        self.requests = RequestLog()
        self.stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.kube = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> "KubeServer":
        """Starts serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends every stream and stops serving."""
        self.stopping.set()
        with self.store.changed:
            self.store.changed.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def api_client(self) -> kubernetes.client.ApiClient:
        """A real `kubernetes` client configured for this server."""
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        return kubernetes.client.ApiClient(configuration)

    def __enter__(self) -> "KubeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002  (quiet)
        del format, args

    def setup(self):
        super().setup()
        # As Go's net/http does: no Nagle delay on small writes (headers, chunks).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self):
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass  # the client hung up: normal for cancelled streams

    def do_GET(self):  # noqa: N802
        self._dispatch("GET")

    def do_POST(self):  # noqa: N802
        self._dispatch("POST")

    def do_PATCH(self):  # noqa: N802
        self._dispatch("PATCH")

    def do_DELETE(self):  # noqa: N802
        self._dispatch("DELETE")

    @property
    def kube(self) -> KubeServer:
        return self.server.kube  # type: ignore[attr-defined]

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query))
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null") if length else None
        route = routes.parse(url.path)
        verb = routes.verb(method, route, query)
        self.kube.requests.add(method, url.path, query, verb, route.rbac_resource if route else "",
                               copy.deepcopy(body))
        failure = self.kube.faults.take_failure(method, url.path)
        if failure is not None:
            reason = _FAILURE_REASONS.get(failure, "InternalError")
            return self.send_json(failure, routes.status(failure, reason, "injected fault"))
        if route is None or route.resource not in SERVED:
            return self.send_text(404, "404 page not found\n")
        try:
            routes.handle(self, method, verb, route, query, body)
        except OSError:  # the client went away mid-stream
            self.close_connection = True

    # Responses used by routes --------------------------------------------------

    def send_json(self, code: int, obj: Dict[str, Any]) -> None:
        self._send(code, "application/json", json.dumps(obj).encode("utf-8"))

    def send_text(self, code: int, text: str) -> None:
        self._send(code, "text/plain; charset=utf-8", text.encode("utf-8"))

    def _send(self, code: int, content_type: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def abort_stream(self) -> None:
        """Cuts the connection mid-stream, as a crashing proxy or apiserver would."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def stream_events(self, route: "routes.Route", query: Dict[str, str], initial, cursor: int) -> None:
        """Writes watch events after `cursor` until timeoutSeconds, a stop, or a dropped stream."""
        kube, generation = self.kube, self.kube.faults.watch_generation
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        self.start_stream("application/json")
        for obj in initial:
            self.write_chunk(routes.event_line("ADDED", obj))
        while not kube.stopping.is_set() and time.monotonic() < deadline:
            if kube.faults.watch_generation != generation:
                return self.abort_stream()
            try:
                events = kube.store.events_after(route.resource, route.namespace, cursor,
                                                 min(_STREAM_POLL_SECONDS, deadline - time.monotonic()))
            except Gone as gone:
                self.write_chunk(routes.event_line("ERROR", routes.status(410, "Expired", str(gone))))
                break
            for event in events:
                cursor = event.resource_version
                if routes.selected(event.object, query):
                    self.write_chunk(routes.event_line(event.type, event.object))
        self.end_stream()

    def stream_log(self, pod_uid: str, drop_after: Optional[int]) -> None:
        """Writes log lines as they are appended until the container stops."""
        store, sent = self.kube.store, 0
        log = store.open_log(pod_uid)  # this run's log: a restarted container writes a new one
        self.start_stream("text/plain")
        while not self.kube.stopping.is_set():
            lines, closed = store.read_log(log, sent, _STREAM_POLL_SECONDS)
            for line in lines:
                if drop_after is not None and sent >= drop_after:
                    return self.abort_stream()
                self.write_chunk(line.encode("utf-8") + b"\n")
                sent += 1
            if closed:
                break
        self.end_stream()


_FAILURE_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                    504: "Timeout"}
