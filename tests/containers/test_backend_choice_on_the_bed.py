"""`backend=auto` and the `trainjob` backend reading the cluster, on real API servers: the
genuine node's bed (Trainer v2.3 and kfdist's runtimes installed) and a bare API server where a
test installs only what its case needs (nothing, Trainer's CRDs, one runtime), with the real RBAC
of the pipeline runner's ServiceAccount deciding what the step may read.
"""

from __future__ import annotations

from typing import List

import pytest

from cluster import crds, operator_sources
from cluster.fixture import REPO
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes import backend as cluster_backend
from kfdist.components.train_distributed.kubernetes.backend_choice import choose_backend
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.client.kube_errors import CrdNotInstalledError

pytestmark = pytest.mark.slow
RUNTIMES = REPO / "manifests" / "runtimes"


def _choose(strategy="multi_worker_mirrored", **values):
    lines: List[str] = []
    fits = lambda: runtime.check_cluster_job(dict(backend="trainjob", strategy=strategy,  # noqa: E731
                                                  work_uri="gs://b/w", **values))
    chosen = choose_backend(strategy, fits, lines.append, api=KubeApi.from_environment())
    [line] = lines
    return chosen, line


def _install_trainer(bed, runtimes=("kfdist-tensorflow.yaml", "kfdist-horovod.yaml"),
                     reader: bool = True) -> None:
    """Trainer v2.3's CRDs on the bare API server, and of kfdist's runtimes those named (and the
    ClusterRole that lets every ServiceAccount read them, unless `reader` is False)."""
    trainer_crds = operator_sources.TRAINER.source() / "manifests" / "base" / "crds"
    crds.install(bed, sorted(trainer_crds.glob("trainer.kubeflow.org_*.yaml")))
    files = [*runtimes, *(["trainer-reader.yaml"] if reader else [])]
    if files:
        bed.kubectl_run("apply", "--server-side", *[f"--filename={RUNTIMES / f}" for f in files])


@pytest.mark.parametrize("strategy, runtime_name", [("multi_worker_mirrored", "kfdist-tensorflow"),
                                                    ("horovod", "kfdist-horovod")])
def test_trainjob_where_trainer_and_the_runtime_are_installed(node_namespace, strategy,
                                                               runtime_name):
    assert _choose(strategy) == (
        "trainjob", f"backend auto: trainjob (Kubeflow Trainer and kfdist's runtime {runtime_name} "
                    "are installed)")


def test_the_operators_job_when_the_job_does_not_fit_the_runtime(node_namespace):
    chosen, line = _choose(restart_policy="Never")
    assert chosen == "tfjob"
    assert "the job needs what the runtime kfdist-tensorflow cannot carry: restart_policy='Never'" \
        in line


@pytest.mark.parametrize("strategy, fallback", [("parameter_server", "tfjob"), ("horovod", "mpijob")])
def test_the_operators_job_without_trainer(bare_namespace, strategy, fallback):
    chosen, line = _choose(strategy)
    assert chosen == fallback
    assert line == (f"backend auto: {fallback} (Kubeflow Trainer is not installed (no CRD "
                    "trainjobs.trainer.kubeflow.org))")


def test_the_operators_job_when_kfdists_runtime_is_missing(bare_api, bare_namespace):
    _install_trainer(bare_api, runtimes=("kfdist-horovod.yaml",))
    chosen, line = _choose()
    assert chosen == "tfjob"
    assert "kfdist's runtime kfdist-tensorflow is not (kubectl apply --server-side -k " \
           "manifests/runtimes)" in line


def test_the_operators_job_when_rbac_hides_the_crd(bare_api, bare_namespace):
    _install_trainer(bare_api, reader=False)
    chosen, line = _choose()
    assert chosen == "tfjob"
    assert "the step may not read the CRD trainjobs.trainer.kubeflow.org: RBAC denied get" in line


def test_without_trainer_the_trainjob_backend_says_what_to_install(bare_namespace):
    with pytest.raises(CrdNotInstalledError, match="install the Kubeflow Trainer"):
        cluster_backend.trainer_customisation(KubeApi.from_environment(), lambda line: None)


def test_without_rights_to_read_the_crd_the_step_assumes_runtime_patches(bare_api,
                                                                         bare_namespace):
    _install_trainer(bare_api, reader=False)
    lines: List[str] = []
    assert cluster_backend.trainer_customisation(KubeApi.from_environment(), lines.append) == \
        "runtimePatches"
    assert "assuming Trainer v2.2 or later (runtimePatches)" in lines[0]
    assert "RBAC denied get customresourcedefinitions" in lines[0], lines
