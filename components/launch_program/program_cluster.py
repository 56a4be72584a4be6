"""A program job on a cluster: rendered for its backend, created (or re-attached to), followed.

Shared by `kfdist launch` and the `train_program` step, so both give a user's program what the
training step gives kfdist's own: a deterministic name and re-attach, the leader's log streamed
through a watch, the operator's reason on failure, and the job deleted on SIGTERM or timeout.
"""

from __future__ import annotations

from typing import Callable, Optional

from kfdist.components.common.errors import require
from kfdist.components.launch_program import program_failures
from kfdist.components.launch_program.program_job import PYTORCH, TENSORFLOW, ProgramJob
from kfdist.components.launch_program.program_pod import ProgramPlacement
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.build.render_trainjob import RUNTIME_PATCHES
from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import FROM_CREATION

TFJOB, PYTORCHJOB, TRAINJOB, MPIJOB = "tfjob", "pytorchjob", "trainjob", "mpijob"
#: The cluster backends that run each framework's programs (an MPI program: an MPIJob).
CLUSTER_BACKENDS_OF = {TENSORFLOW: (TFJOB, TRAINJOB), PYTORCH: (PYTORCHJOB, TRAINJOB)}
#: Where a program's replicas can run: processes here, a job of a cluster, or `auto`.
PROGRAM_BACKENDS = ("local", TFJOB, PYTORCHJOB, TRAINJOB, MPIJOB, "auto")


def default_restart_policy(framework: str, mpi: bool, backend: str) -> str:
    """The restart policy a job gets when none is asked for: `OnFailure` for an MPI program (an
    MPIJob launcher's default), a TrainJob's runtime's, else `ExitCode`."""
    from kfdist.components.launch_program.render_program_trainjob import RESTART_POLICIES

    if mpi:
        return "OnFailure"
    if backend == TRAINJOB:
        return RESTART_POLICIES.get(framework, "ExitCode")
    return "ExitCode"


def check_backend(job: ProgramJob, backend: str) -> None:
    """Raises InvalidInputError unless `backend` runs `job`, naming the backends that do."""
    expected = (MPIJOB,) if job.mpi else CLUSTER_BACKENDS_OF.get(job.framework, ())
    require(backend in expected, f"backend {backend!r} does not run "
            f"{'an MPI program' if job.mpi else 'framework ' + repr(job.framework)}; "
            f"valid: {['local', *expected]}")


def render(job: ProgramJob, backend: str, placement: ProgramPlacement,
           customisation: str = RUNTIME_PATCHES) -> RenderedJob:
    """The TFJob, PyTorchJob, MPIJob or TrainJob that runs `job` (pure).

    Args:
      job: The job.
      backend: `tfjob`, `pytorchjob`, `trainjob` or `mpijob`.
      placement: Name, namespace, image, PVC and scheduling.
      customisation: For a TrainJob, the installed Trainer's pod-customisation field.

    Raises:
      InvalidInputError: A backend that does not run the job, or any bad field.
    """
    from kfdist.components.launch_program.render_program_mpijob import render_program_mpijob
    from kfdist.components.launch_program.render_program_tfjob import render_program_tfjob
    from kfdist.components.launch_program.render_program_trainjob import render_program_trainjob
    from kfdist.components.launch_program.render_pytorchjob import render_pytorchjob

    check_backend(job, backend)
    if backend == TRAINJOB:
        return render_program_trainjob(job, placement, customisation)
    if backend == MPIJOB:
        return render_program_mpijob(job, placement)
    return (render_program_tfjob if backend == TFJOB else render_pytorchjob)(job, placement)


def customisation_for(backend: str, api, log: Callable[[str], None]) -> str:
    """The installed Trainer's pod-customisation field for a TrainJob (read from its CRD)."""
    if backend != TRAINJOB:
        return RUNTIME_PATCHES
    from kfdist.components.train_distributed.kubernetes import backend as cluster_backend

    return cluster_backend.trainer_customisation(api, log)


def follow(rendered: RenderedJob, api, *, timeout_seconds: Optional[float],
           log: Callable[[str], None], timeout_from: str = FROM_CREATION,
           wording: Optional[program_failures.Wording] = None):
    """Creates the job (or re-attaches to it), streams its leader's log and waits for its end;
    SIGTERM and the timeout delete it. Returns the launcher's outcome.

    `wording` says how the caller's user fixes a failure kfdist knows (default: the
    `train_program` step's parameters).

    Raises:
      TrainingFailedError: The job failed (the operator's reason and the failed replicas' lines,
        and what the failure is when kfdist knows: `program_failures`).
      JobTimeoutError: It did not end in time (it was deleted).
    """
    from kfdist.components.train_distributed.kubernetes.lifecycle import failed_replicas
    from kfdist.components.train_distributed.kubernetes.lifecycle import launcher, step_signals

    log(f"kfdist: {rendered.kind.kind} {rendered.namespace}/{rendered.name}")
    with step_signals.cancel_on_sigterm(), \
            program_failures.explained(wording or program_failures.STEP_CLUSTER), \
            failed_replicas.quoted(api, rendered):
        return launcher.launch_and_wait(rendered, api, timeout_seconds=timeout_seconds,
                                        log=log, owner=api.read_own_pod_reference(),
                                        timeout_from=timeout_from)
