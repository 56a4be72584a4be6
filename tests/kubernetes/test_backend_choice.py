"""`backend=auto` and the Trainer release: what the step reads from the test API server.

The real `kubernetes` client reads the cluster (the TrainJob CRD, kfdist's
ClusterTrainingRuntimes) from the stateful test API server; RBAC denials come
from its fault injection.
"""

from __future__ import annotations

from typing import List

import pytest

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes import backend as cluster_backend
from kfdist.components.train_distributed.kubernetes.backend_choice import choose_backend
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.client.kube_errors import CrdNotInstalledError
from fakes import crd_schema
from fakes.kube_server import KubeServer
from fakes.kube_server.trainer_objects import CRDS, RUNTIMES, install_trainer


@pytest.fixture
def server():
    with KubeServer() as started:
        yield started


def _choose(server, strategy="multi_worker_mirrored", **values):
    lines: List[str] = []
    fits = lambda: runtime.check_cluster_job(dict(backend="trainjob", strategy=strategy,  # noqa: E731
                                                  work_uri="gs://b/w", **values))
    chosen = choose_backend(strategy, fits, lines.append, api=KubeApi(server.api_client()))
    [line] = lines
    return chosen, line


@pytest.mark.parametrize("strategy, runtime_name", [("multi_worker_mirrored", "kfdist-tensorflow"),
                                                    ("horovod", "kfdist-horovod")])
def test_trainjob_where_trainer_and_the_runtime_are_installed(server, strategy, runtime_name):
    install_trainer(server.store)
    assert _choose(server, strategy) == (
        "trainjob", f"backend auto: trainjob (Kubeflow Trainer and kfdist's runtime {runtime_name} "
                    "are installed)")


@pytest.mark.parametrize("strategy, fallback", [("parameter_server", "tfjob"), ("horovod", "mpijob")])
def test_the_operators_job_without_trainer(server, strategy, fallback):
    chosen, line = _choose(server, strategy)
    assert chosen == fallback
    assert line == (f"backend auto: {fallback} (Kubeflow Trainer is not installed (no CRD "
                    "trainjobs.trainer.kubeflow.org))")


def test_the_operators_job_when_kfdists_runtime_is_missing(server):
    install_trainer(server.store)
    server.store.delete(RUNTIMES + ("", "kfdist-tensorflow"))
    chosen, line = _choose(server)
    assert chosen == "tfjob"
    assert "kfdist's runtime kfdist-tensorflow is not (kubectl apply --server-side -k " \
           "manifests/runtimes)" in line


def test_the_operators_job_when_the_job_does_not_fit_the_runtime(server):
    install_trainer(server.store)
    chosen, line = _choose(server, restart_policy="Never")
    assert chosen == "tfjob"
    assert "the job needs what the runtime kfdist-tensorflow cannot carry: restart_policy='Never'" \
        in line


def test_the_operators_job_when_rbac_hides_the_crd(server):
    install_trainer(server.store)
    server.faults.forbid("get", "customresourcedefinitions")
    chosen, line = _choose(server)
    assert chosen == "tfjob"
    assert "the step may not read the CRD trainjobs.trainer.kubeflow.org: RBAC denied get" in line


def test_local_without_any_kubernetes_api(tmp_path, monkeypatch):
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    lines: List[str] = []
    assert choose_backend("multi_worker_mirrored", lambda: None, lines.append) == "local"
    assert lines == ["backend auto: local (no Kubernetes API: not in a pod and no kubeconfig)"]


def test_auto_is_validated_as_its_fallback_before_any_api_call():
    runtime.validate_training_args(backend="auto", strategy="horovod", workers=2)
    with pytest.raises(InvalidInputError, match=r"restart_policy must be one of \['Never', "
                                                "'OnFailure'\] with strategy 'horovod'"):
        runtime.validate_training_args(backend="auto", strategy="horovod", restart_policy="ExitCode")


# ---- the installed Trainer's release, read from its TrainJob CRD -----------------------------

@pytest.mark.parametrize("crd_file, field", [(crd_schema.CRD_FILES[("TrainJob", "v1alpha1")],
                                              "runtimePatches"),
                                             (crd_schema.TRAINJOB_V2_1_CRD, "podTemplateOverrides")])
def test_the_step_reads_the_pod_customisation_field_from_the_crd(server, crd_file, field):
    install_trainer(server.store, trainjob_crd=crd_file)
    lines: List[str] = []
    assert cluster_backend.trainer_customisation(KubeApi(server.api_client()), lines.append) == field
    assert lines == [f"trainjob backend: the cluster's TrainJob CRD has {field}"]


def test_trainer_v2_0_is_refused_naming_the_upgrade(server):
    install_trainer(server.store, runtimes=False)
    crd_key = CRDS + ("", "trainjobs.trainer.kubeflow.org")

    def as_v2_0(crd):  # v2.0 had podSpecOverrides where v2.2+ have runtimePatches
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"]["podSpecOverrides"] = spec["properties"].pop("runtimePatches")
    server.store.update(crd_key, as_v2_0)
    with pytest.raises(InvalidInputError, match=r"Trainer is v2.0 \(podSpecOverrides\): kfdist's "
                                                r"TrainJobs need Trainer v2.1 or later"):
        cluster_backend.trainer_customisation(KubeApi(server.api_client()), lambda line: None)


def test_without_trainer_the_trainjob_backend_says_what_to_install(server):
    with pytest.raises(CrdNotInstalledError, match="install the Kubeflow Trainer"):
        cluster_backend.trainer_customisation(KubeApi(server.api_client()), lambda line: None)


def test_without_rights_to_read_the_crd_the_step_assumes_runtime_patches(server):
    install_trainer(server.store)
    server.faults.forbid("get", "customresourcedefinitions")
    lines: List[str] = []
    assert cluster_backend.trainer_customisation(KubeApi(server.api_client()), lines.append) == \
        "runtimePatches"
    assert "assuming Trainer v2.2 or later (runtimePatches)" in lines[0]
