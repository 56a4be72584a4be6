"""`backend=auto`: the step picks TrainJob, TFJob/MPIJob or local processes from what it can reach.

* No Kubernetes API (not in a pod, no kubeconfig): `local`.
* Kubeflow Trainer installed (its TrainJob CRD), kfdist's runtime for the
  strategy installed (`kfdist-tensorflow` or `kfdist-horovod`), and the job
  fits the runtime (`trainjob_runtime.check_fits_runtime`): `trainjob`.
* Otherwise `tfjob` (`mpijob` for Horovod), the Training Operator's and the
  MPI Operator's jobs.

Every choice is logged with its reason. Reading the cluster-scoped CRD and
runtime needs the ClusterRole of `manifests/runtimes/trainer-reader.yaml`; without it
the step says Trainer is not installed where the API's discovery (open to every
account) shows Trainer's API not served (`KubeApi.read_crd_schema`), else that it may not
read it, and falls back.
"""

from __future__ import annotations

from typing import Callable, Optional

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.kubernetes.build import trainjob_runtime
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1
from kfdist.components.train_distributed.kubernetes.client import kube_errors


def fallback_backend(strategy: str) -> str:
    """The operator backend that runs `strategy`: `mpijob` for Horovod, else `tfjob`."""
    return (strategy_rules.MPIJOB_BACKEND if strategy == strategy_rules.HOROVOD
            else strategy_rules.TFJOB_BACKEND)


def _trainjob_unavailable(api, strategy: str, fits_trainjob: Callable[[], None]) -> Optional[str]:
    """Why a TrainJob cannot run this job here; None when it can."""
    kind = TRAINJOB_V1ALPHA1
    runtime = trainjob_runtime.runtime_for(strategy)
    try:
        api.read_crd_schema(kind.crd_name, kind.version)
    except kube_errors.NotFoundError:
        return f"Kubeflow Trainer is not installed (no CRD {kind.crd_name})"
    except kube_errors.PermissionDeniedError as error:
        return f"the step may not read the CRD {kind.crd_name}: {error}"
    try:
        api.get_cluster_training_runtime(runtime)
    except kube_errors.NotFoundError:
        return (f"Kubeflow Trainer is installed, kfdist's runtime {runtime} is not "
                f"({kube_errors.RUNTIMES_INSTALL})")
    except kube_errors.PermissionDeniedError as error:
        return f"the step may not read the ClusterTrainingRuntime {runtime}: {error}"
    try:
        fits_trainjob()
    except InvalidInputError as error:
        return f"the job needs what the runtime {runtime} cannot carry: {error}"
    return None


def reachable_api(api, log: Callable[[str], None]):
    """`api`, else the pod's service account's or the kubeconfig's Kubernetes API; None, logged
    as `auto` choosing `local`, where there is none."""
    if api is None:
        from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi

        api = KubeApi.from_environment_if_any()
    if api is None:
        log("backend auto: local (no Kubernetes API: not in a pod and no kubeconfig)")
    return api


def choose_backend(strategy: str, fits_trainjob: Callable[[], None], log: Callable[[str], None],
                   api=None) -> str:
    """The backend `auto` stands for here and now, logged with its reason.

    Args:
      strategy: The job's strategy.
      fits_trainjob: Raises `InvalidInputError` when the job cannot run as a TrainJob.
      log: Receives the choice and its reason.
      api: A `kube_api.KubeApi`; by default from the pod's service account or the kubeconfig.

    Raises:
      KubeApiError: The API server could not be reached.
    """
    api = reachable_api(api, log)
    if api is None:
        return strategy_rules.LOCAL_BACKEND
    reason = _trainjob_unavailable(api, strategy, fits_trainjob)
    if reason is None:
        log(f"backend auto: trainjob (Kubeflow Trainer and kfdist's runtime "
            f"{trainjob_runtime.runtime_for(strategy)} are installed)")
        return strategy_rules.TRAINJOB_BACKEND
    fallback = fallback_backend(strategy)
    log(f"backend auto: {fallback} ({reason})")
    return fallback
