"""A stateful Kubernetes API server over real HTTP plus a scripted operator, for launcher tests.

Kept for what the real control plane (tests/cluster/, the tests in tests/containers/) cannot be
made to do on demand: 5xx bursts, dropped watches and log streams, 410 Gone at a chosen moment, a
missing CRD, an RBAC refusal of one verb mid-job (pods/log), a condition written at a chosen
moment (and an OOMKilled container, which the test bed's node cannot report where podman does
not). A runtime Trainer does not have and an RBAC refusal of the create are on the bed. Every
other cluster claim belongs on the real control plane; the test operators that run replicas as
processes (`process_operator`, `trainjob_run`, `kueue`) still serve the e2e tests in
tests/e2e/ and tests/kubernetes/ not yet moved there.
"""

from fakes.kube_server.faults import DEFAULT_USER, Faults, RecordedRequest
from fakes.kube_server.operator import FakeOperator, Scenario
from fakes.kube_server.sample_jobs import sample_mpijob, sample_tfjob
from fakes.kube_server.server import KubeServer

__all__ = ["DEFAULT_USER", "FakeOperator", "Faults", "KubeServer", "RecordedRequest", "Scenario",
           "sample_mpijob", "sample_tfjob"]
