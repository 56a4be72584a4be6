"""`backend=auto` where no Kubernetes API is reachable, and its validation before any call.

What `auto` reads from a cluster (Trainer's CRD, kfdist's runtimes, RBAC) is proven on real API
servers: tests/containers/test_backend_choice_on_the_bed.py.
"""

from __future__ import annotations

from typing import List

import pytest

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.backend_choice import choose_backend


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
                                                "'OnFailure'\\] with strategy 'horovod'"):
        runtime.validate_training_args(backend="auto", strategy="horovod", restart_policy="ExitCode")
