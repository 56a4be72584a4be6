"""A stateful Kubernetes API server over real HTTP plus a scripted operator, for launcher tests."""

from fakes.kube_server.faults import DEFAULT_USER, Faults, RecordedRequest
from fakes.kube_server.operator import FakeOperator, Scenario
from fakes.kube_server.sample_jobs import sample_mpijob, sample_tfjob
from fakes.kube_server.server import KubeServer

__all__ = ["DEFAULT_USER", "FakeOperator", "Faults", "KubeServer", "RecordedRequest", "Scenario",
           "sample_mpijob", "sample_tfjob"]
