"""`kfdist launch --backend auto`: where a program runs, from what this machine can reach.

* No Kubernetes API (not in a pod, no kubeconfig): `local`.
* An MPI program (`--mpi`): `mpijob`.
* TensorFlow: `tfjob`.
* PyTorch: `trainjob` where Kubeflow Trainer and its `torch-distributed` runtime are installed,
  else `pytorchjob`.

The choice is logged with its reason.
"""

from __future__ import annotations

from typing import Callable, Optional

from kfdist.components.launch_program.program_job import TENSORFLOW
from kfdist.components.launch_program.render_program_trainjob import TORCH_RUNTIME
from kfdist.components.train_distributed.kubernetes.backend_choice import reachable_api
from kfdist.components.train_distributed.kubernetes.build.job_kinds import TRAINJOB_V1ALPHA1
from kfdist.components.train_distributed.kubernetes.client import kube_errors


def _no_torch_trainjob(api) -> Optional[str]:
    """Why a TrainJob on torch-distributed cannot run here; None when it can."""
    kind = TRAINJOB_V1ALPHA1
    try:
        api.read_crd_schema(kind.crd_name, kind.version)
        api.get_cluster_training_runtime(TORCH_RUNTIME)
    except kube_errors.NotFoundError as error:
        return f"Kubeflow Trainer or its runtime {TORCH_RUNTIME} is not installed ({error})"
    except kube_errors.PermissionDeniedError as error:
        return f"may not read Kubeflow Trainer's CRD or runtime: {error}"
    return None


def choose_program_backend(framework: str, log: Callable[[str], None], api=None,
                           mpi: bool = False) -> str:
    """The backend `auto` stands for, for a program of `framework` (an MPI one with `mpi`),
    logged with its reason.

    Raises:
      KubeApiError: The API server could not be reached.
    """
    api = reachable_api(api, log)
    if api is None:
        return "local"
    if mpi:
        log("backend auto: mpijob (an MPI program on a cluster)")
        return "mpijob"
    if framework == TENSORFLOW:
        log("backend auto: tfjob (a TensorFlow program on a cluster)")
        return "tfjob"
    reason = _no_torch_trainjob(api)
    if reason is None:
        log(f"backend auto: trainjob (Kubeflow Trainer and its {TORCH_RUNTIME} runtime are "
            "installed)")
        return "trainjob"
    log(f"backend auto: pytorchjob ({reason})")
    return "pytorchjob"
