"""Kubeflow Pipelines on the bed is configured consistently: each Service pods use has an
EndpointSlice at the node whose ports carry the Service's port names, the API server's
configuration names the bed's database and object store, and each host process is bound to the
Role KFP's manifests give it; the UI's server finds the API server, the object store, MLMD's
gRPC-Web proxy and Argo's log archive where the bed puts them."""

from __future__ import annotations

from pathlib import Path

from cluster import kfp_config, kfp_ui


def _layout() -> kfp_config.KfpLayout:
    return kfp_config.KfpLayout(Path("/bed"), "10.240.3.1", http_port=40001, grpc_port=40002,
                                mlmd_port=40003, s3_port=40004, db_port=40005, ui_port=40006,
                                mlmd_web_port=40007)


def test_each_service_has_a_slice_at_the_node_with_its_port_names():
    objects = kfp_config.service_objects(_layout())
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    slices = [o for o in objects if o["kind"] == "EndpointSlice"]
    assert set(services) == set(kfp_config.SERVICES)
    for endpoint_slice in slices:
        service = services[endpoint_slice["metadata"]["labels"]["kubernetes.io/service-name"]]
        assert "selector" not in service["spec"]  # the slice, not a selector, says where
        assert ({p["name"] for p in endpoint_slice["ports"]}
                == {p["name"] for p in service["spec"]["ports"]})
        assert endpoint_slice["endpoints"][0]["addresses"] == ["10.240.3.1"]
    target = {p["name"]: p["port"] for s in slices for p in s["ports"]}
    assert target == {"http": 40001, "grpc": 40002, "grpc-api": 40003, "s3": 40004}


def test_the_api_servers_configuration_names_the_beds_database_and_object_store():
    config = kfp_config.apiserver_config(_layout())
    assert config["DBConfig"]["MySQLConfig"]["Port"] == "40005"
    assert config["ObjectStoreConfig"]["Host"] == "10.240.3.1"
    assert config["ObjectStoreConfig"]["Port"] == "40004"
    assert config["POD_NAMESPACE"] == kfp_config.NAMESPACE
    assert "plugins" not in config  # no MLflow plugin for every run to reach
    argv = kfp_config.apiserver_argv("apiserver", _layout())
    # The HTTP gateway dials localhost + the gRPC flag: an address there would break it.
    assert "--rpcPortFlag=:40002" in argv and "--httpPortFlag=10.240.3.1:40001" in argv


def test_each_host_process_is_bound_to_its_role_in_kfps_namespace():
    bindings = kfp_config.identity_bindings()
    assert {(b["subjects"][0]["name"], b["roleRef"]["name"]) for b in bindings} == set(
        kfp_config.IDENTITIES.values())
    assert {b["metadata"]["namespace"] for b in bindings} == {kfp_config.NAMESPACE}


def test_manifests_are_put_in_kfps_namespace_but_cluster_scoped_kinds_stay_without_one():
    documents = kfp_config.namespaced([
        {"kind": "Role", "metadata": {"name": "a"}},
        {"kind": "CustomResourceDefinition", "metadata": {"name": "b"}}])
    assert documents[0]["metadata"]["namespace"] == kfp_config.NAMESPACE
    assert "namespace" not in documents[1]["metadata"]


def test_the_uis_server_reads_the_beds_api_store_mlmd_proxy_and_log_archive():
    env = kfp_ui.server_env(_layout(), Path("/bed/kfp-ui.kubeconfig"))
    assert (env["ML_PIPELINE_SERVICE_HOST"], env["ML_PIPELINE_SERVICE_PORT"]) == ("10.240.3.1",
                                                                                  "40001")
    # No namespace: the server would address `<host>.<namespace>`, a Service's name.
    assert (env["MINIO_HOST"], env["MINIO_PORT"], env["MINIO_NAMESPACE"]) == ("10.240.3.1",
                                                                             "40004", "")
    # An artifact names the store as its launcher reached it: a Service, rewritten to the bed's.
    assert env["MINIO_ENDPOINT_REWRITE"] == "seaweedfs.kubeflow:9000=http://10.240.3.1:40004"
    assert env["METADATA_ENVOY_SERVICE_SERVICE_PORT"] == "40007"
    assert env["ARGO_KEYFORMAT"] == kfp_config.ARGO_KEY_FORMAT
    repository = kfp_config.workflow_controller_configmap()["data"]["artifactRepository"]
    assert kfp_config.ARGO_KEY_FORMAT in repository  # where Argo archives the logs
    proxy = kfp_ui.grpcwebproxy_argv("grpcwebproxy", _layout())
    assert "--backend_addr=10.240.3.1:40003" in proxy
    assert "--server_http_debug_port=40007" in proxy
    assert kfp_ui.server_argv(Path("/ui"), _layout())[-2:] == ["/ui/client", "40006"]
