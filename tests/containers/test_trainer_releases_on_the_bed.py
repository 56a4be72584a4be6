"""The `trainjob` backend against each Trainer release the step supports, on real API servers:
it reads the installed TrainJob CRD and writes the pod settings in that release's field.

- Trainer v2.3 (the full bed): `runtimePatches`.
- Trainer v2.1 (a bed of its own, with the JobSet release it requires): `podTemplateOverrides`,
  which its controller applies to the pods; kfdist's runtimes pass v2.1's validating webhook.
- Trainer v2.0 (its CRD on a bare API server): refused, naming the upgrade.
"""

from __future__ import annotations

from typing import List

import pytest

from cluster import crds, operator_sources, trainer_v2_1
from cluster.fixture import REPO
from cluster.namespaces import runner_namespace
from containers.test_cluster_claims_on_the_bed import _step_options
from containers.test_run_on_the_bed import CLAIM
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes import backend as cluster_backend
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi

pytestmark = pytest.mark.slow
#: The Trainer release before v2.1, whose TrainJob CRD has `podSpecOverrides`.
TRAINER_V2_0 = "v2.0.0"
#: A node selector the bed's node has: the pods can run with it.
ON_LINUX = {"kubernetes.io/os": "linux"}


def _customisation(lines: List[str]) -> str:
    return cluster_backend.trainer_customisation(KubeApi.from_environment(), lines.append)


def test_trainer_v2_3_gets_runtime_patches(bed_namespace):
    lines: List[str] = []
    assert _customisation(lines) == "runtimePatches"
    assert lines == ["trainjob backend: the cluster's TrainJob CRD has runtimePatches"]


def test_a_trainer_v2_1_cluster_gets_pod_template_overrides_and_trains(
        trainer_v2_1_bed, host_mount, kfdist_images, digits_dataset, tmp_path, monkeypatch):
    """The step reads v2.1's CRD, puts the pod settings in `podTemplateOverrides`, and Trainer
    v2.1's own controller applies them to the pods JobSet v0.10 makes; training goes through."""
    ns = runner_namespace(trainer_v2_1_bed, tmp_path, monkeypatch)
    log: List[str] = []
    with host_mount(ns.claim_path(CLAIM)):
        report = runtime.train(digits_dataset, str(tmp_path / "model"), log=log.append, epochs=2,
                               batch_size_per_replica=32, node_selector=ON_LINUX,
                               **_step_options(ns, "run-v21", backend="trainjob"))
    assert len(report.replicas) == 2 and len({r.weights_sha256 for r in report.replicas}) == 1
    assert "trainjob backend: the cluster's TrainJob CRD has podTemplateOverrides" in log
    [trainjob] = ns.get("trainjob")
    assert "runtimePatches" not in trainjob["spec"]
    [override] = trainjob["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]
    assert override["spec"]["nodeSelector"] == ON_LINUX
    [jobset] = ns.get("jobset")
    [node] = jobset["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == ON_LINUX
    pods = ns.get("pod")
    assert pods and all(p["spec"]["nodeSelector"] == ON_LINUX for p in pods)
    assert trainer_v2_1.TRAINER.version == "v2.1.0"


def test_trainer_v2_0_is_refused_naming_the_upgrade(bare_api, bare_namespace):
    crd = (operator_sources.module_source(trainer_v2_1.TRAINER.path, TRAINER_V2_0) / "manifests" /
           "base" / "crds" / "trainer.kubeflow.org_trainjobs.yaml")
    crds.install(bare_api, [crd])
    bare_api.kubectl_run("apply", "--server-side", "--filename=" + str(
        REPO / "manifests" / "runtimes" / "trainer-reader.yaml"))
    with pytest.raises(InvalidInputError, match=r"Trainer is v2.0 \(podSpecOverrides\): kfdist's "
                                                r"TrainJobs need Trainer v2.1 or later"):
        _customisation([])
