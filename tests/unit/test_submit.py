"""`kfdist submit` against a fake Kubeflow Pipelines API over real HTTP, for what the real API
server cannot give on demand (transient 503s, a rejected token, a login page, multi-user mode) and
what is read from the requests as sent.

The fake (tests/fakes/kfp_server.py) answers the v2beta1 REST calls kfp.Client makes; nothing in
kfp is patched. The real API server runs kfdist's submits on the genuine node's bed:
`tests/containers/test_kfp_on_the_bed.py` (a run that succeeds, fails or is terminated, a pipeline
it refuses, a host that does not answer) and `test_kfp_submit_on_the_bed.py` (no `--wait`,
`--timeout`, experiments created and reused, typed parameters). Bad input is refused before any
request: those tests give an address where nothing listens.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from kfdist import cli
from kfdist.submit import SubmitResult, parse_param_value, submit_pipeline
from fakes.kfp_server import API

MNIST_YAML = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines", "mnist.yaml")
REQUIRED = ["--param", "source_uri=gs://data/mnist", "--param", "export_base=gs://models/serving"]
FAST = ["--poll-interval", "0.02"]


@pytest.fixture
def kfdist_main():
    """`kfdist submit ...` through the real CLI's entry point."""
    return lambda *argv: cli.main(["submit", *argv])


@pytest.fixture
def nowhere() -> str:
    """An address where nothing listens: a check that needed the API would fail with "cannot
    reach the KFP API" (exit 1), so a refusal (exit 2) was made before any request."""
    from cluster.processes import free_port

    return f"http://127.0.0.1:{free_port()}"


def _stdout_json(capsys):
    out, err = capsys.readouterr()
    return json.loads(out.strip().splitlines()[-1]), err


def test_submit_with_params_waits_for_success(kfp_server, kfdist_main, capsys, monkeypatch):
    monkeypatch.setenv("KF_PIPELINES_TOKEN", "ci-token")
    rc = kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED,
                     "--param", "backend=tfjob", "--param", "workers=4",
                     "--param", "learning_rate=0.01", "--experiment", "ci",
                     "--run-name", "ci-42", "--wait", *FAST)
    result, err = _stdout_json(capsys)
    assert rc == 0, err
    assert result["state"] == "SUCCEEDED"
    assert result["url"] == f"{kfp_server.url}/#/runs/details/{result['run_id']}"
    assert "PENDING -> RUNNING" in err and "RUNNING -> SUCCEEDED" in err

    (create,) = kfp_server.requests_to("POST", f"{API}/runs")
    body = create.body
    assert body["display_name"] == "ci-42"
    # The compiled spec (and its Kubernetes platform spec) arrive unchanged.
    with open(MNIST_YAML) as f:
        docs = list(yaml.safe_load_all(f))
    if len(docs) > 1:  # kfp sends {pipeline_spec, platform_spec} when there is a platform spec
        assert body["pipeline_spec"] == {"pipeline_spec": docs[0], "platform_spec": docs[1]}
    else:
        assert body["pipeline_spec"] == docs[0]
    # Values arrive typed as the pipeline declares them.
    params = body["runtime_config"]["parameters"]
    assert params == {"source_uri": "gs://data/mnist", "export_base": "gs://models/serving",
                      "backend": "tfjob", "workers": 4, "learning_rate": 0.01}
    assert type(params["workers"]) is int and type(params["learning_rate"]) is float
    (experiment,) = kfp_server.experiments.values()
    assert experiment["display_name"] == "ci"
    assert body["experiment_id"] == experiment["experiment_id"]
    assert all(r.headers.get("authorization") == "Bearer ci-token" for r in kfp_server.requests)
    assert len(kfp_server.run_gets()) == 2  # RUNNING, then SUCCEEDED


@pytest.mark.parametrize("outcome", ["FAILED", "CANCELED"])
def test_run_that_does_not_succeed_exits_1(kfp_server, kfdist_main, capsys, outcome):
    kfp_server.outcome = outcome
    rc = kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED, "--wait", *FAST)
    result, err = _stdout_json(capsys)
    assert rc == 1
    assert result["state"] == outcome
    assert f"ended {outcome}" in err
    if outcome == "FAILED":
        assert "task 'train-distributed' failed" in err


def test_transient_errors_while_waiting_are_retried(kfp_server, kfdist_main, capsys):
    kfp_server.transient_errors = 2
    rc = kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED, "--wait", *FAST)
    result, err = _stdout_json(capsys)
    assert rc == 0 and result["state"] == "SUCCEEDED"
    assert "503" in err


def test_namespace_scopes_the_experiment(kfp_server, kfdist_main, capsys):
    kfp_server.multi_user = True
    assert kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED,
                       "--namespace", "team-a", "--experiment", "ci") == 0
    capsys.readouterr()
    (lookup,) = kfp_server.requests_to("GET", f"{API}/experiments")
    assert lookup.query["namespace"] == "team-a"
    (experiment,) = kfp_server.experiments.values()
    assert experiment["namespace"] == "team-a"


def test_multi_user_without_namespace_says_so(kfp_server, kfdist_main, capsys):
    kfp_server.multi_user = True
    assert kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED) == 1
    assert "pass --namespace" in capsys.readouterr().err


def test_rejected_token_fails_fast_with_the_status(kfp_server, kfdist_main, capsys):
    kfp_server.reject_status = 401
    rc = kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED, "--existing-token", "bad")
    err = capsys.readouterr().err
    assert rc == 1
    assert "HTTP 401" in err and "token" in err
    assert len(kfp_server.requests) == 1  # one health check, no kfp retry loop


def test_login_page_instead_of_the_api_is_an_error(kfp_server, kfdist_main, capsys):
    kfp_server.login_page = True
    rc = kfdist_main(MNIST_YAML, "--host", kfp_server.url, *REQUIRED)
    err = capsys.readouterr().err
    assert rc == 1
    assert "text/html" in err and "login page" in err
    assert len(kfp_server.requests) == 1


def test_unreachable_host_is_an_error(nowhere, kfdist_main, capsys):
    rc = kfdist_main(MNIST_YAML, "--host", nowhere, *REQUIRED)
    assert rc == 1
    assert "cannot reach the KFP API" in capsys.readouterr().err


# ----------------------------------------------------------------- invalid input: no requests


def _assert_invalid(rc, capsys, *fragments):
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "kfdist: invalid input:" in err and "cannot reach" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def test_unknown_param_lists_the_valid_ones(nowhere, kfdist_main, capsys):
    rc = kfdist_main(MNIST_YAML, "--host", nowhere, *REQUIRED, "--param", "worker=4")
    _assert_invalid(rc, capsys, "unknown pipeline parameter 'worker'",
                    "workers (NUMBER_INTEGER)", "source_uri (STRING, required)",
                    "learning_rate (NUMBER_DOUBLE)")


@pytest.mark.parametrize("param,fragment", [
    ("workers=four", "'workers' is NUMBER_INTEGER"),
    ("workers=2.5", "'workers' is NUMBER_INTEGER"),
    ("learning_rate=fast", "'learning_rate' is NUMBER_DOUBLE"),
    ("learning_rate=nan", "'learning_rate' is NUMBER_DOUBLE"),
    ("workers", "--param needs KEY=VALUE"),
])
def test_bad_param_value(nowhere, kfdist_main, capsys, param, fragment):
    rc = kfdist_main(MNIST_YAML, "--host", nowhere, *REQUIRED, "--param", param)
    _assert_invalid(rc, capsys, fragment)


def test_missing_required_param(nowhere, kfdist_main, capsys):
    rc = kfdist_main(MNIST_YAML, "--host", nowhere, "--param", "source_uri=gs://d/m")
    _assert_invalid(rc, capsys, "missing required pipeline parameter export_base")


def test_repeated_param(nowhere, kfdist_main, capsys):
    rc = kfdist_main(MNIST_YAML, "--host", nowhere, *REQUIRED, "--param", "workers=2",
                     "--param", "workers=3")
    _assert_invalid(rc, capsys, "--param workers is given more than once")


def test_missing_file(nowhere, kfdist_main, capsys, tmp_path):
    rc = kfdist_main(str(tmp_path / "nope.yaml"), "--host", nowhere, *REQUIRED)
    _assert_invalid(rc, capsys, "does not exist")


@pytest.mark.parametrize("name,text,fragment", [
    ("deploy.yaml", "apiVersion: v1\nkind: ConfigMap\n", "not a compiled KFP pipeline spec"),
    ("broken.yaml", "pipelineInfo: [\n", "cannot read pipeline file"),
    ("typo.yaml", "pipelineInfo: {name: p}\nroot: {dag: {taskz: {}}}\n", "not a valid KFP"),
    ("pipeline.json", "{}", "must end in .yaml or .yml"),
])
def test_not_a_pipeline_spec(nowhere, kfdist_main, capsys, tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    rc = kfdist_main(str(path), "--host", nowhere)
    _assert_invalid(rc, capsys, fragment)


@pytest.mark.parametrize("extra,fragment", [
    (["--host", "kfp.example.com"], "--host must be"),
    (["--timeout", "60"], "--timeout only applies with --wait"),
    (["--wait", "--timeout", "0"], "--timeout must be a positive"),
])
def test_bad_options(nowhere, kfdist_main, capsys, extra, fragment):
    rc = kfdist_main(MNIST_YAML, "--host", nowhere, *REQUIRED, *extra)
    _assert_invalid(rc, capsys, fragment)


# ----------------------------------------------------------------- the Python API and types


def test_submit_pipeline_returns_a_frozen_result(kfp_server):
    lines = []
    result = submit_pipeline(MNIST_YAML, kfp_server.url,
                             {"source_uri": "gs://d/m", "export_base": "gs://m/s", "workers": 3},
                             experiment="api", wait=True, log=lines.append, poll_interval=0.02)
    assert isinstance(result, SubmitResult) and result.succeeded and result.finished
    with pytest.raises(AttributeError):
        result.state = "FAILED"  # type: ignore[misc]
    assert any("RUNNING -> SUCCEEDED" in line for line in lines)
    (create,) = kfp_server.requests_to("POST", f"{API}/runs")
    assert create.body["runtime_config"]["parameters"]["workers"] == 3


@pytest.mark.parametrize("ptype,text,expected", [
    ("BOOLEAN", "true", True), ("BOOLEAN", "No", False), ("BOOLEAN", "1", True),
    ("NUMBER_DOUBLE", "3", 3.0), ("NUMBER_DOUBLE", "1e-3", 0.001),
    ("NUMBER_INTEGER", " 7 ", 7), ("NUMBER_INTEGER", "-2", -2),
    ("STRING", "", ""), ("STRING", "a=b", "a=b"),
    ("LIST", '[1, "a"]', [1, "a"]), ("STRUCT", '{"k": [1]}', {"k": [1]}),
])
def test_param_values_parse_to_declared_types(ptype, text, expected):
    value = parse_param_value("p", text, ptype)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("ptype,text", [
    ("BOOLEAN", "maybe"), ("LIST", '{"a": 1}'), ("LIST", "1,2"), ("STRUCT", "[1]"),
    ("NUMBER_DOUBLE", "inf"), ("NUMBER_INTEGER", "1e3"),
])
def test_param_values_that_do_not_parse(ptype, text):
    from kfdist.components.common.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=f"'p' is {ptype}"):
        parse_param_value("p", text, ptype)
