"""A training step of a pipeline that passed no run id takes its run and task from its own pod:
KFP's run label and Argo's node name, a retry's attempt suffix dropped."""

import pytest

from kfdist.components.train_distributed.kubernetes.client import kfp_task
from kfdist.components.train_distributed.kubernetes.client.kube_errors import NotFoundError
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions


def _pod(node: str, run_id: str = "4d3e8495") -> dict:
    return {"metadata": {"labels": {kfp_task.RUN_ID_LABEL: run_id},
                         "annotations": {kfp_task.NODE_NAME_ANNOTATION: node}}}


@pytest.mark.parametrize("node,task", [
    ("user-training-n2hfc.root.train-distributed.executor", "train-distributed"),
    ("user-training-n2hfc.root.train-distributed.executor(1)", "train-distributed"),
    ("mnist-x.root.condition-1.export-saved-model.executor", "export-saved-model")])
def test_the_task_is_the_executor_nodes_parent(node, task):
    assert kfp_task.task_of(_pod(node)) == ("4d3e8495", task)


@pytest.mark.parametrize("pod", [
    _pod("user-training-n2hfc.root.train-distributed.driver"), _pod("w.root.t.executor", ""),
    {"metadata": {"name": "not-a-step"}}])
def test_a_pod_that_is_no_kfp_step_names_none(pod):
    assert kfp_task.task_of(pod) is None


class _Api:
    def __init__(self, pod=None):
        self.pod, self.asked = pod, []

    def get_pod(self, namespace, name):
        self.asked.append((namespace, name))
        if self.pod is None:
            raise NotFoundError(f"pods {name} not found", 404)
        return self.pod


def test_a_step_without_a_run_id_takes_its_pods(monkeypatch):
    monkeypatch.setenv("KFP_POD_NAME", "user-training-n2hfc-system-container-impl-1")
    monkeypatch.setenv("KFP_POD_NAMESPACE", "kubeflow")
    api = _Api(_pod("user-training-n2hfc.root.train-distributed.executor(1)"))
    named = kfp_task.with_own_task(ClusterOptions(), api)
    assert (named.run_id, named.task_name) == ("4d3e8495", "train-distributed")
    assert api.asked == [("kubeflow", "user-training-n2hfc-system-container-impl-1")]
    given = ClusterOptions(run_id="r1", task_name="train")
    assert kfp_task.with_own_task(given, api) is given and len(api.asked) == 1
    absent = ClusterOptions()
    assert kfp_task.with_own_task(absent, _Api()) is absent


def test_outside_a_kfp_pod_nothing_is_asked(monkeypatch):
    monkeypatch.delenv("KFP_POD_NAME", raising=False)
    options, api = ClusterOptions(), _Api(_pod("w.root.t.executor"))
    assert kfp_task.with_own_task(options, api) is options and api.asked == []
