"""A test Kueue: its job webhook suspends queued jobs, and the test admits them.

As Kueue v0.19 does (pkg/controller/jobframework, the mpijob and trainjob
integrations): on create, a job of an enabled integration that carries
`kueue.x-k8s.io/queue-name` is suspended (MPIJob, TFJob:
`spec.runPolicy.suspend`; TrainJob: `spec.suspend`); a job without the label,
or of a disabled integration, is left alone. The shipped configuration
enables `kubeflow.org/mpijob` and `trainer.kubeflow.org/trainjob` and leaves
`kubeflow.org/tfjob` off. Admission unsuspends the job (this double injects
no node selectors or podset labels: there are no flavors here).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    MPIJOB_V2BETA1, TFJOB_V1, TRAINJOB_V1ALPHA1)
from fakes.kube_server.store import ObjectStore

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: Integration name by plural, and which the shipped configuration enables.
FRAMEWORKS = {"tfjobs": "kubeflow.org/tfjob", "mpijobs": "kubeflow.org/mpijob",
              "trainjobs": "trainer.kubeflow.org/trainjob"}
DEFAULT_ENABLED = ("kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob")


class FakeKueue:
    """Hooks into the store's admission; `admit(plural, namespace, name)` unsuspends a job."""

    def __init__(self, store: ObjectStore, enabled: Iterable[str] = DEFAULT_ENABLED):
        self.store = store
        self.enabled = set(enabled)
        self.suspended: list = []
        store.admission.insert(0, self._default)  # mutating webhooks run before validating ones

    def stop(self) -> None:
        if self._default in self.store.admission:
            self.store.admission.remove(self._default)

    def _default(self, route, body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        framework = FRAMEWORKS.get(route.plural)
        labels = (body.get("metadata") or {}).get("labels") or {}
        if framework not in self.enabled or not labels.get(QUEUE_NAME_LABEL):
            return None
        spec = body.setdefault("spec", {})
        if route.plural == "trainjobs":
            spec["suspend"] = True
        else:
            spec.setdefault("runPolicy", {})["suspend"] = True
        self.suspended.append((route.plural, route.namespace, body["metadata"]["name"]))
        return None

    def admit(self, plural: str, namespace: str, name: str) -> None:
        """The ClusterQueue admitted the job's workload: unsuspend it."""
        kind = {k.plural: k for k in (TFJOB_V1, MPIJOB_V2BETA1, TRAINJOB_V1ALPHA1)}[plural]

        def unsuspend(job: Dict[str, Any]) -> None:
            if plural == "trainjobs":
                job["spec"]["suspend"] = False
            else:
                job["spec"]["runPolicy"]["suspend"] = False
        self.store.update((kind.group, kind.version, plural, namespace, name), unsuspend)
