"""The test API server's own semantics that clients outside the launcher rely on.

The `status` subresource (the benchmarks write job conditions through it, as
an operator does) and the server run as a program from a kubeconfig.
"""

from __future__ import annotations

import os
import subprocess
import sys

import kubernetes
import pytest

from fakes.kube_server import KubeServer, sample_tfjob

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TFJOBS = ("kubeflow.org", "v1", "tfjobs")


def _tfjob_calls(api_client):
    custom = kubernetes.client.CustomObjectsApi(api_client)
    job = sample_tfjob("status-1")
    args = ("kubeflow.org", "v1", job.namespace, "tfjobs")
    custom.create_namespaced_custom_object(*args, job.body)
    return custom, args, job.name


def test_status_is_written_only_through_its_subresource():
    with KubeServer() as server:
        custom, args, name = _tfjob_calls(server.api_client())
        custom.patch_namespaced_custom_object(
            *args, name, {"metadata": {"labels": {"a": "b"}},
                          "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}})
        patched = custom.get_namespaced_custom_object(*args, name)
        assert patched["metadata"]["labels"]["a"] == "b"
        assert "conditions" not in (patched.get("status") or {})

        running = {"type": "Running", "status": "True", "reason": "TFJobRunning"}
        written = custom.patch_namespaced_custom_object_status(
            *args, name, {"metadata": {"labels": {"a": "c"}}, "status": {"conditions": [running]}})
        assert written["status"]["conditions"] == [running]
        assert written["metadata"]["labels"]["a"] == "b"
        assert int(written["metadata"]["resourceVersion"]) > int(
            patched["metadata"]["resourceVersion"])
        assert custom.get_namespaced_custom_object_status(*args, name) == written


def test_a_watch_sees_a_status_write():
    with KubeServer() as server:
        custom, args, name = _tfjob_calls(server.api_client())
        since = custom.get_namespaced_custom_object(*args, name)["metadata"]["resourceVersion"]
        custom.patch_namespaced_custom_object_status(
            *args, name, {"status": {"conditions": [{"type": "Created", "status": "True"}]}})
        events = list(kubernetes.watch.Watch().stream(
            custom.list_namespaced_custom_object, *args, resource_version=since, timeout_seconds=1))
        assert [(e["type"], e["object"]["status"]["conditions"][0]["type"]) for e in events] == [
            ("MODIFIED", "Created")]


def test_a_status_delete_is_refused():
    with KubeServer() as server:
        _, args, name = _tfjob_calls(server.api_client())
        with pytest.raises(kubernetes.client.ApiException) as refused:
            server.api_client().call_api(
                f"/apis/kubeflow.org/v1/namespaces/{args[2]}/tfjobs/{name}/status", "DELETE",
                response_type="object", _return_http_data_only=True)
        assert refused.value.status == 405
        assert server.store.get(TFJOBS + (args[2], name))


def test_the_server_runs_as_a_program_behind_a_kubeconfig(tmp_path):
    config_file = tmp_path / "kubeconfig"
    program = subprocess.Popen([sys.executable, "-m", "fakes.kube_server",
                                "--kubeconfig-out", str(config_file)],
                               cwd=TESTS_DIR, stdout=subprocess.PIPE, text=True)
    try:
        url = program.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = kubernetes.config.new_client_from_config(config_file=str(config_file))
        custom, args, name = _tfjob_calls(client)
        assert custom.get_namespaced_custom_object(*args, name)["metadata"]["name"] == name
    finally:
        program.terminate()
    assert program.wait(timeout=10) == 0
