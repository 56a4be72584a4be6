"""A stateful Kubernetes API server over real HTTP plus a scripted operator, for launcher tests.

Kept only for the faults the real control plane (tests/cluster/, the tests in tests/containers/)
cannot be made to produce on demand: bursts of 5xx answers, dropped watches, 410 Gone at a chosen
moment (the watch history compacted past the job), a log stream cut midway. `FakeOperator` moves a
TFJob, an MPIJob or a TrainJob through its life by a `Scenario` (pods, log lines, conditions) while
a test injects them (tests/kubernetes/test_launcher.py); the server's own protocol is tested in
tests/kubernetes/test_api_server.py. Every other cluster claim belongs on the real control plane.
`sample_jobs` holds the hand-written jobs those tests and the bed's submit.
"""

from fakes.kube_server.faults import Faults, RecordedRequest
from fakes.kube_server.operator import FakeOperator, Scenario
from fakes.kube_server.sample_jobs import sample_mpijob, sample_tfjob, sample_trainjob
from fakes.kube_server.server import KubeServer

__all__ = ["FakeOperator", "Faults", "KubeServer", "RecordedRequest", "Scenario",
           "sample_mpijob", "sample_tfjob", "sample_trainjob"]
