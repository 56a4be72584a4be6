"""A small fake Kubeflow Pipelines API server, over real HTTP, for tests.

Kubeflow Pipelines' real API server runs on the genuine node's bed, where
`kfdist submit` meets it (tests/containers/test_kfp_on_the_bed.py: a run that
succeeds, fails or is terminated, a refused pipeline, an unreachable host;
test_kfp_submit_on_the_bed.py: no --wait, --timeout, experiments, typed
parameters).
This fake serves the unit tests what that server cannot give on demand
(transient 503s, a rejected token, a login page in front of the API,
multi-user mode) and what they read from the requests themselves (the typed
parameters and the spec as sent), without a bed.

It implements only the v2beta1 REST endpoints that `kfp.Client` 2.17 calls to
create a run from a package and follow it:

    GET  /apis/v2beta1/healthz                      {"multi_user": bool}
    GET  /apis/v2beta1/experiments?filter=&namespace=
    POST /apis/v2beta1/experiments
    GET  /apis/v2beta1/experiments/{experiment_id}
    POST /apis/v2beta1/runs
    GET  /apis/v2beta1/runs/{run_id}

It is stateful: experiments are stored, and each run walks PENDING -> RUNNING
-> its scripted outcome, one step per GET of the run (`polls_per_state` GETs
per step). Every request is recorded (method, path, query, headers, JSON
body). Any other route answers 404, as the real server does for unknown ones.

    def test_something(kfp_server):
        kfp_server.outcome = "FAILED"
        ... kfdist submit --host kfp_server.url ...
        assert kfp_server.requests_to("POST", "/apis/v2beta1/runs")
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import threading
import urllib.parse
import uuid
from typing import Any, Dict, List, Optional

import pytest

from fakes.kfp_experiments import ApiError, create_experiment, list_experiments
from fakes.http_fake import serve
from fakes.kfp_experiments import now as timestamp

API = "/apis/v2beta1"

#: Environment variables kfp.Client reads; tests run without them.
KFP_ENV_VARS = (
    "KF_PIPELINES_ENDPOINT", "KF_PIPELINES_UI_ENDPOINT", "KF_PIPELINES_TOKEN",
    "KF_PIPELINES_IAP_OAUTH2_CLIENT_ID", "KF_PIPELINES_APP_OAUTH2_CLIENT_ID",
    "KF_PIPELINES_APP_OAUTH2_CLIENT_SECRET", "KF_PIPELINES_DEFAULT_EXPERIMENT_NAME",
    "KF_PIPELINES_OVERRIDE_EXPERIMENT_NAME",
)


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    query: Dict[str, str]
    headers: Dict[str, str]  # names in lower case
    body: Any  # the parsed JSON body, or None


class FakeKfpServer:
    """The fake server; `start()` it (or use the `kfp_server` fixture).

    Attributes (set them before the request they should affect):
      outcome: Final state of runs created from now on: SUCCEEDED, FAILED,
        CANCELED, SKIPPED, or RUNNING for a run that never finishes.
      polls_per_state: GETs a run answers with each of PENDING and RUNNING.
      multi_user: What healthz reports; in multi-user mode experiments need a
        namespace, as on the real server.
      reject_status: When set (such as 401), every request is answered with it.
      transient_errors: The next this-many GETs of a run answer 503.
      login_page: When true, every request gets an HTML page with status 200,
        as from an authenticating proxy that redirected to its login form.
    """

    def __init__(self, multi_user: bool = False):
        self.outcome = "SUCCEEDED"
        self.polls_per_state = 1
        self.multi_user = multi_user
        self.reject_status: Optional[int] = None
        self.transient_errors = 0
        self.login_page = False
        self.requests: List[RecordedRequest] = []
        self.experiments: Dict[str, Dict[str, Any]] = {}
        self.runs: Dict[str, Dict[str, Any]] = {}
        self._scripts: Dict[str, List[str]] = {}
        self._lock = threading.Lock()
        self._httpd: Optional[http.server.ThreadingHTTPServer] = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "FakeKfpServer":
        self._httpd = serve(self._dispatch)
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeKfpServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The server's base address, such as http://127.0.0.1:PORT."""
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # ------------------------------------------------------------------ helpers for tests

    def add_experiment(self, name: str, namespace: str = "") -> Dict[str, Any]:
        """Stores an experiment as if it had been created earlier."""
        with self._lock:
            return create_experiment(self.experiments, self.multi_user,
                                     {"display_name": name, "namespace": namespace})

    def requests_to(self, method: str, path: str) -> List[RecordedRequest]:
        """The recorded requests with this method and exact path."""
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    def run_gets(self) -> List[RecordedRequest]:
        """The recorded GETs of single runs."""
        with self._lock:
            return [r for r in self.requests
                    if r.method == "GET" and r.path.startswith(f"{API}/runs/")]

    # ------------------------------------------------------------------ HTTP

    def _dispatch(self, handler: http.server.BaseHTTPRequestHandler, method: str) -> None:
        split = urllib.parse.urlsplit(handler.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(
            split.query, keep_blank_values=True).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(RecordedRequest(
                method=method, path=split.path, query=query,
                headers={k.lower(): v for k, v in handler.headers.items()}, body=body))
            try:
                if self.reject_status is not None:
                    raise ApiError(self.reject_status, 16, "request rejected by the fake server")
                status, payload = self._route(method, split.path, query, body)
            except ApiError as err:
                status, payload = err.status, {
                    "error": err.message, "code": err.code, "message": err.message, "details": []}
        content_type, data = "application/json", json.dumps(payload).encode()
        if self.login_page:
            status, content_type = 200, "text/html; charset=utf-8"
            data = b"<!DOCTYPE html><html><body><form>Log in</form></body></html>"
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method: str, path: str, query: Dict[str, str], body: Any):
        if method == "GET" and path == f"{API}/healthz":
            return 200, {"multi_user": self.multi_user}
        if path == f"{API}/experiments":
            if method == "GET":
                return 200, list_experiments(self.experiments, self.multi_user, query)
            if method == "POST":
                return 200, create_experiment(self.experiments, self.multi_user, body)
        m = re.fullmatch(rf"{API}/experiments/([^/:]+)", path)
        if m and method == "GET":
            if m.group(1) not in self.experiments:
                raise ApiError(404, 5, f"Experiment {m.group(1)} not found")
            return 200, self.experiments[m.group(1)]
        if path == f"{API}/runs" and method == "POST":
            return 200, self._create_run(body)
        m = re.fullmatch(rf"{API}/runs/([^/:]+)", path)
        if m and method == "GET":
            return 200, self._get_run(m.group(1))
        raise ApiError(404, 5, f"fake KFP server: no route for {method} {path}")

    # ------------------------------------------------------------------ runs

    def _create_run(self, body: Any) -> Dict[str, Any]:
        if not isinstance(body, dict) or not body.get("display_name"):
            raise ApiError(400, 3, "Invalid input error: Run name is empty")
        if not body.get("pipeline_spec") and not body.get("pipeline_version_reference"):
            raise ApiError(400, 3, "Invalid input error: a run needs a pipeline spec "
                                    "or a pipeline version")
        experiment_id = body.get("experiment_id")
        if experiment_id and experiment_id not in self.experiments:
            raise ApiError(404, 5, f"Experiment {experiment_id} not found")
        run_id = str(uuid.uuid4())
        now = timestamp()
        run = {
            "run_id": run_id,
            "experiment_id": experiment_id,
            "display_name": body["display_name"],
            "pipeline_spec": body.get("pipeline_spec"),
            "runtime_config": body.get("runtime_config") or {},
            "storage_state": "AVAILABLE",
            "created_at": now,
            "scheduled_at": now,
            "state": "PENDING",
            "state_history": [{"update_time": now, "state": "PENDING"}],
        }
        if body.get("service_account"):
            run["service_account"] = body["service_account"]
        per = max(1, self.polls_per_state)
        self._scripts[run_id] = ["PENDING"] * per + ["RUNNING"] * per + [self.outcome]
        self.runs[run_id] = run
        return run

    def _get_run(self, run_id: str) -> Dict[str, Any]:
        if run_id not in self.runs:
            raise ApiError(404, 5, f"Run {run_id} not found")
        if self.transient_errors > 0:
            self.transient_errors -= 1
            raise ApiError(503, 14, "upstream connect error (fake)")
        run, script = self.runs[run_id], self._scripts[run_id]
        if len(script) > 1:
            script.pop(0)
        state = script[0]
        if state != run["state"]:
            now = timestamp()
            run["state"] = state
            run["state_history"].append({"update_time": now, "state": state})
            if state in ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"):
                run["finished_at"] = now
            if state == "FAILED":
                run["error"] = {"code": 2, "message": "task 'train-distributed' failed "
                                                      "(fake outcome)", "details": []}
        return run


@pytest.fixture
def kfp_server(monkeypatch):
    """A started FakeKfpServer, with kfp.Client's environment variables cleared."""
    for name in KFP_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    with FakeKfpServer() as server:
        yield server
