"""The leader's progress posts to Kubeflow Trainer's status API, against a real HTTPS endpoint.

The endpoint here is a local HTTPS server with a certificate of the test's own CA, given to the
reporter exactly as Trainer gives it to a pod (three variables naming the URL and two files). The
real Trainer controller takes the posts in `tests/containers/test_run_on_the_bed.py`.
"""

import datetime
import http.server
import json
import ssl
import threading

import pytest

from cluster import certs
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status
from kfdist.components.train_distributed.replica import trainer_status as ts

PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/run-1/status"


@pytest.fixture
def endpoint(tmp_path):
    """(environment for the reporter, the requests the server took, a setter of its answer)."""
    authority = certs.Authority(tmp_path / "pki")
    cert, key = authority.issue("status", "status-server", hosts=("127.0.0.1",))
    seen, answer = [], {"code": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({"path": self.path, "auth": self.headers["Authorization"],
                         "body": json.loads(body)})
            self.send_response(answer["code"])
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text("projected-token-1\n")
    environ = {ts.STATUS_URL_ENV: f"https://127.0.0.1:{server.server_address[1]}{PATH}",
               ts.STATUS_TOKEN_ENV: str(token), ts.STATUS_CA_CERT_ENV: str(tmp_path / "pki" / "ca.crt")}
    yield environ, seen, answer
    server.shutdown()


def _train(reporter, epochs: int) -> None:
    reporter.on_train_begin()
    for epoch in range(epochs):
        reporter.on_epoch_begin(epoch)
        reporter.on_epoch_end(epoch, {"loss": 0.5 / (epoch + 1), "accuracy": 0.8 + epoch / 100})


def test_without_trainers_variables_there_is_no_endpoint(endpoint):
    environ, _, _ = endpoint
    assert ts.StatusEndpoint.from_environment({}) is None
    partial = {k: v for k, v in environ.items() if k != ts.STATUS_TOKEN_ENV}
    assert ts.StatusEndpoint.from_environment(partial) is None
    assert ts.StatusEndpoint.from_environment(environ) is not None


def test_the_update_carries_progress_time_left_and_metrics():
    now = datetime.datetime(2026, 5, 1, 12, 30, 5, tzinfo=datetime.timezone.utc)
    update = ts.status_update(2, 5, 10.4, {"loss": 0.25, "accuracy": 0.9}, now)
    assert update == {"trainerStatus": {
        "progressPercentage": 40, "estimatedRemainingSeconds": 31,
        "metrics": [{"name": "accuracy", "value": "0.9"}, {"name": "loss", "value": "0.25"}],
        "lastUpdatedTime": "2026-05-01T12:30:05Z"}}
    assert ts.status_update(5, 5, 10.0, {}, now)["trainerStatus"]["estimatedRemainingSeconds"] == 0


def test_the_leader_posts_every_epoch_with_the_projected_token(endpoint):
    environ, seen, _ = endpoint
    reporter = ts.TrainerStatusReporter(ts.StatusEndpoint.from_environment(environ), 3, 6000)
    _train(reporter, 3)
    assert [s["path"] for s in seen] == [PATH] * 3
    assert {s["auth"] for s in seen} == {"Bearer projected-token-1"}
    statuses = [s["body"]["trainerStatus"] for s in seen]
    assert [s["progressPercentage"] for s in statuses] == [33, 66, 100]
    assert statuses[-1]["estimatedRemainingSeconds"] == 0
    names = {m["name"] for m in statuses[-1]["metrics"]}
    assert names == {"loss", "accuracy", "examples_per_second"}
    assert float(next(m["value"] for m in statuses[-1]["metrics"] if m["name"] == "loss")) == \
        pytest.approx(0.5 / 3, rel=1e-5)


def test_a_refusing_endpoint_is_logged_once_and_never_fails_training(endpoint, capsys):
    environ, seen, answer = endpoint
    answer["code"] = 403
    reporter = ts.TrainerStatusReporter(ts.StatusEndpoint.from_environment(environ), 6, 100)
    _train(reporter, 6)  # no exception
    assert len(seen) == ts.MAX_FAILURES  # then it stops asking
    lines = [line for line in capsys.readouterr().out.splitlines() if "not posted" in line]
    assert len(lines) == 2 and lines[-1].endswith("no more posts")
    assert environ[ts.STATUS_URL_ENV] in lines[0]


def test_the_step_log_line_of_a_trainjobs_trainer_status():
    job = {"status": {"trainerStatus": {
        "progressPercentage": 40, "estimatedRemainingSeconds": 12,
        "metrics": [{"name": "accuracy", "value": "0.91"}], "lastUpdatedTime": "2026-05-01T12:30:05Z"}}}
    assert job_status.trainer_progress(job) == "Progress 40%, about 12 s left; accuracy=0.91"
    assert job_status.trainer_progress({"status": {"conditions": []}}) is None
