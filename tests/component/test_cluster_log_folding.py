"""A cluster job's streamed log folds a per-replica value within the leader's container run, and
never hides a line that is not part of the value: the next traceback of a value cut off, or
kfdist's own `pod ... is Failed` line with the same `[chief-0]` label.

The job runs on `fakes.kube_server` (its scripted operator writes the chief's log and fails it);
the log is followed by `program_cluster.follow`, as `kfdist launch` and the train_program step do.
"""

import pytest

from fakes.kube_server import FakeOperator, KubeServer, Scenario, sample_tfjob
from fakes.kube_server.operator import FAILED
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.launch_program import program_cluster
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi

HEAD = "ValueError: Attempt to convert a value (PerReplica:{"
# The value is cut off (its stream dropped a line's end): the next lines are a new failure.
LOG = ("epoch 1/2", HEAD, "  0: <tf.Tensor: shape=(4,), dtype=float32, numpy=",
       "array([0.05037099, 0.24721867, 0.485604  , 0.93188924],", "",
       "Traceback (most recent call last):", "RuntimeError: OOM when allocating tensor")


@pytest.fixture
def server():
    server = KubeServer().start()
    operator = FakeOperator(server.store)
    yield server, operator
    operator.stop()
    server.stop()


def test_a_cut_off_value_hides_neither_the_next_error_nor_the_pods_end(server):
    kube, operator = server
    job = sample_tfjob(name="fold-1")
    operator.script(job.name, Scenario(outcome=FAILED, log_lines=LOG, run_seconds=0.6))
    lines = []
    with pytest.raises(TrainingFailedError):
        program_cluster.follow(job, KubeApi(kube.api_client()), timeout_seconds=30,
                               log=lines.append)
    chief = [line for line in lines if line.startswith("[chief-0] ")]
    assert "[chief-0] RuntimeError: OOM when allocating tensor" in chief, lines
    assert "[chief-0] Traceback (most recent call last):" in chief
    assert f"[chief-0] {HEAD} ... [3 line(s) of the value left out]" in chief
    assert any(" is Failed" in line for line in chief), chief
    assert not any("0.05037099" in line for line in lines)
