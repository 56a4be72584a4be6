"""The `trainjob` backend on a Trainer v2.1 cluster, whose TrainJob CRD carries the pod settings in
`podTemplateOverrides`.

The test bed runs Trainer v2.3 only, so this one runs on the test API server: its test Trainer
and JobSet controllers (`kube_server.trainjob_run`) play v2.1's and run each pod's container as a
process; the step and the replicas meet at a `gs://` work location on the GCS emulator. Every
other TrainJob claim (TensorFlow and Horovod runtimes, the replicas' TF_CONFIG from their JobSet
identity, the tabular and images pipelines) runs on the real Trainer and JobSet:
tests/containers/test_run_on_the_bed.py.
"""

from __future__ import annotations

import pytest

from fakes import crd_schema
from fakes.kube_server.trainer_objects import PODS
from fakes.kube_server.cluster_fixtures import NAMESPACE
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1

pytestmark = pytest.mark.slow


def test_a_trainer_v2_1_cluster_gets_pod_template_overrides(cluster, dataset_uri, digits_dataset,
                                                           tmp_path):
    """The step reads the installed TrainJob CRD: on Trainer v2.1 the pod settings travel in
    `podTemplateOverrides`, which the v2.1 controller applies, and training goes through."""
    from kfdist.components.train_distributed import runtime
    from fakes.kube_server.cluster_fixtures import Log, step_options
    from fakes.kube_server.trainer_objects import CRDS, install_trainer

    cluster.server.store.delete(CRDS + ("", TRAINJOB_V1ALPHA1.crd_name))
    install_trainer(cluster.server.store, trainjob_crd=crd_schema.TRAINJOB_V2_1_CRD, runtimes=False)
    log = Log()
    report = runtime.train(digits_dataset, str(tmp_path / "model"), backend="trainjob", workers=2,
                           epochs=2, batch_size_per_replica=32, node_selector={"pool": "cpu"},
                           **step_options(run_id="run-v21"), dataset_uri=dataset_uri, log=log)
    assert len({r.weights_sha256 for r in report.replicas}) == 1
    assert "trainjob backend: the cluster's TrainJob CRD has podTemplateOverrides" in log.lines
    [post] = cluster.server.requests.matching(verb="create", resource="trainjobs")
    assert "runtimePatches" not in post.body["spec"]
    [override] = post.body["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]
    assert override["spec"]["nodeSelector"] == {"pool": "cpu"}
    v2_1 = crd_schema.load_crd(crd_schema.crd_path(crd_schema.TRAINJOB_V2_1_CRD))
    assert v2_1.validate(post.body) == []
    pods = cluster.server.store.items(PODS, NAMESPACE)
    assert pods and all(p["spec"]["nodeSelector"] == {"pool": "cpu"} for p in pods)
    assert cluster.wait_no_processes() == []
