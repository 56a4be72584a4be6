"""Where a job goes when no namespace is named: the pod's own, else the kubeconfig context's (as
kubectl takes it), else `default`."""

import json

from kfdist.components.train_distributed.kubernetes.client import pod_identity


def _kubeconfig(path, namespace=None):
    context = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "now",
                                "contexts": [{"name": "other", "context": {"namespace": "no"}},
                                             {"name": "now", "context": context}]}))
    return str(path)


def test_the_current_contexts_namespace_outside_a_pod(tmp_path, monkeypatch):
    monkeypatch.delenv("KFP_POD_NAMESPACE", raising=False)
    monkeypatch.setattr(pod_identity, "SERVICE_ACCOUNT_NAMESPACE_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path / "a", "team-a"))
    assert pod_identity.default_namespace() == "team-a"
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path / "b"))
    assert pod_identity.default_namespace() == "default"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert pod_identity.default_namespace() == "default"


def test_the_pods_own_namespace_comes_first(tmp_path, monkeypatch):
    monkeypatch.setenv("KFP_POD_NAMESPACE", "step-ns")
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path / "a", "team-a"))
    assert pod_identity.default_namespace() == "step-ns"
