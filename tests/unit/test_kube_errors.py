"""What an RBAC refusal tells the user to apply: the namespaced Role for a namespace's objects,
the cluster reader role for the cluster-scoped objects kfdist reads (the TrainJob CRD, Trainer's
runtimes)."""

from __future__ import annotations

from kfdist.components.train_distributed.kubernetes.client import kube_errors


def _forbidden(resource: str, namespace: str, message: str) -> str:
    status = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
              "message": message}
    error = kube_errors.from_status(status, "get", resource, namespace)
    assert isinstance(error, kube_errors.PermissionDeniedError)
    return str(error)


def test_a_namespaced_refusal_names_the_pipeline_runners_role():
    said = ('tfjobs.kubeflow.org "x" is forbidden: User "system:serviceaccount:team-a:runner" '
            'cannot get resource "tfjobs" in API group "kubeflow.org" in the namespace "team-a"')
    message = _forbidden("tfjobs.kubeflow.org", "team-a", said)
    assert message.startswith("RBAC denied get tfjobs.kubeflow.org in namespace team-a for "
                              "system:serviceaccount:team-a:runner: apply manifests/base/rbac.yaml "
                              "(Role kfdist-pipeline-runner)")


def test_a_cluster_scoped_refusal_names_the_cluster_reader_role():
    said = ('clustertrainingruntimes.trainer.kubeflow.org "torch-distributed" is forbidden: User '
            '"system:serviceaccount:team-a:runner" cannot get resource "clustertrainingruntimes" '
            'in API group "trainer.kubeflow.org" at the cluster scope')
    message = _forbidden("clustertrainingruntimes.trainer.kubeflow.org",
                         kube_errors.CLUSTER_SCOPE, said)
    assert message.startswith(
        "RBAC denied get clustertrainingruntimes.trainer.kubeflow.org at the cluster scope for "
        "system:serviceaccount:team-a:runner: apply manifests/runtimes/trainer-reader.yaml "
        "(ClusterRole kfdist-trainer-reader, bound to every service account)")
    assert "manifests/base/rbac.yaml" not in message


def test_a_runtime_trainers_webhook_does_not_know_says_how_to_install_kfdists():
    for said in ('admission webhook "vtrainjob.kb.io" denied the request: runtime '
                 "'kfdist-tensorflw' not found",
                 'admission webhook "vtrainjob.kb.io" denied the request: spec.runtimeRef: '
                 'Invalid value: "kfdist-tensorflw": ClusterTrainingRuntime must be created'):
        status = {"kind": "Status", "code": 403, "message": said}
        error = kube_errors.from_status(status, "create", "trainjobs.trainer.kubeflow.org", "t1")
        assert isinstance(error, kube_errors.AdmissionDeniedError)
        assert str(error).endswith("install kfdist's Kubeflow Trainer runtimes: kubectl apply "
                                   "--server-side -k manifests/runtimes"), str(error)
