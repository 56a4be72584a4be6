"""`kfdist render` prints, object for object, the job the training step creates.

The step runs for real (`runtime.train` with a cluster backend: validation,
staging on the GCS emulator, the create call to the API server); a scripted
operator then fails the job, which is all this test needs: the object the
step POSTed. The configurations are the ones the renderers are validated with.
"""

from __future__ import annotations

import argparse

import pytest

from kfdist import render_cmd
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    MPIJOB_V2BETA1, TFJOB_V1, TRAINJOB_V1ALPHA1)
from kfdist.step_flags import step_values
from fakes import crd_schema
from fakes.kube_server import FakeOperator, Scenario
from fakes.kube_server.cluster_fixtures import NAMESPACE

CONFIGURATIONS = {
    "tfjob-mwms-chief-3x4gpu": ["--backend", "tfjob", "--strategy", "multi_worker_mirrored",
                                "--workers", "3", "--chief", "--gpus-per-worker", "4",
                                "--cpu-per-worker", "4", "--memory-per-worker", "16Gi"],
    "tfjob-ps-chief-2ps-4w-eval": ["--backend", "tfjob", "--strategy", "parameter_server",
                                   "--workers", "4", "--ps", "2", "--evaluator",
                                   "--node-selector", "pool=cpu", "--backoff-limit", "2",
                                   "--active-deadline-seconds", "600",
                                   "--service-account", "trainer"],
    "mpijob-4x2": ["--backend", "mpijob", "--strategy", "horovod", "--workers", "4",
                   "--slots-per-worker", "2", "--gpus-per-worker", "2"],
    "trainjob-ps-queued": ["--backend", "trainjob", "--strategy", "parameter_server",
                           "--workers", "3", "--ps", "2", "--evaluator", "--gpus-per-worker", "1",
                           "--node-selector", "pool=gpu", "--queue-name", "team-a",
                           "--service-account", "trainer"],
}


@pytest.fixture
def cluster_operator():
    """A scripted operator that fails every job once it is Running: no replica runs."""
    return lambda store: FakeOperator(store, Scenario(outcome="Failed", pending_seconds=0.05,
                                                      run_seconds=0.05))


def _parse(argv):
    parser = argparse.ArgumentParser(prog="kfdist")
    render_cmd.add_render_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["render"] + argv)


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_render_prints_the_object_the_step_creates(name, cluster, dataset_uri, digits_dataset,
                                                   tmp_path):
    args = _parse(CONFIGURATIONS[name] + [
        "--namespace", NAMESPACE, "--run-id", f"run-{name}", "--task-name", "train",
        "--timeout-seconds", "60", "--dataset-uri", dataset_uri])
    with pytest.raises(TrainingFailedError):
        runtime.train(digits_dataset, str(tmp_path / "model"), dataset_uri=dataset_uri,
                      log=lambda line: None, **step_values(args))
    [post] = [r for r in cluster.server.requests.matching(verb="create")
              if r.resource in ("tfjobs", "mpijobs", "trainjobs")]
    rendered, _, _, _ = render_cmd.render_from_args(args)
    assert rendered == post.body
    kind = {"TFJob": TFJOB_V1, "MPIJob": MPIJOB_V2BETA1, "TrainJob": TRAINJOB_V1ALPHA1}[rendered["kind"]]
    assert crd_schema.load_crd(crd_schema.crd_path_for(kind)).validate(rendered) == []
