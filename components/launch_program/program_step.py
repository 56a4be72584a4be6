"""Runtime of `train_program`: a user's program as the pipeline's training step.

The program runs in every replica as `kfdist launch` runs it (local backend:
processes with the operator's environment), with `KFDIST_DATA_DIR` the
sharded dataset, `KFDIST_MODEL_DIR` the artifact's `saved_model/` and
`KFDIST_CHECKPOINT_DIR` its `checkpoints/` (so a retried step resumes from
them). Once it succeeds, the step completes the `Model` artifact the way
`train_distributed` does, so `evaluate_model` and `export_saved_model` take
it unchanged: the dataset's metadata beside the SavedModel, and the serving
SavedModel built from it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable, Optional, Sequence

from kfdist.components.common import dataset_spec
from kfdist.components.common import dataset_statistics
from kfdist.components.common import model_artifact as ma
from kfdist.components.common import signature_check
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.launch_program.local_launch import run_local
from kfdist.components.launch_program.program_cluster import default_restart_policy
from kfdist.components.launch_program.program_job import ProgramJob

#: The backend that runs the replicas as processes of the step.
LOCAL = "local"
#: The backend chosen against the cluster (`program_backend`).
AUTO = "auto"
#: Where a step of this kind records what ran, in the Model artifact.
PROGRAM_REPORT_FILE = "program_report.json"


@dataclasses.dataclass(frozen=True)
class ProgramReport:
    """What the program's run left: its command, layout, restarts and wall time.

    Attributes:
      command: The program and its arguments.
      framework: `tensorflow` or `pytorch`.
      replicas: Replica processes (nodes for PyTorch).
      restarts: Replica restarts made under the restart policy.
      wall_seconds: From the first replica's start to the job's end.
      serving_model: Whether the serving SavedModel was built (else the export builds it).
      backend: Where the replicas ran: `local`, `tfjob`, `pytorchjob`, `trainjob` or `mpijob`.
    """

    command: Sequence[str]
    framework: str
    replicas: int
    restarts: int
    wall_seconds: float
    serving_model: bool
    backend: str = LOCAL

    def to_json(self) -> str:
        """The report as JSON."""
        return json.dumps(dataclasses.asdict(self), indent=2)


def train_program(dataset_dir: str, model_dir: str, command: Sequence[str], *,
                  framework: str, workers: int, ps: int = 0, chief: bool = False,
                  evaluator: bool = False, procs_per_worker: int = 1,
                  restart_policy: str = "", backoff_limit: int = 6,
                  active_deadline_seconds: Optional[float] = None, mpi: bool = False,
                  backend: str = "local", stage: bool = False,
                  cluster: Optional["ClusterOptions"] = None, dataset_uri: Optional[str] = None,
                  log: Callable[[str], None] = print) -> ProgramReport:
    """Runs `command` as a distributed job on the dataset and completes the Model artifact.

    Args:
      dataset_dir: The kfdist dataset (`KFDIST_DATA_DIR`).
      model_dir: The Model artifact's directory; the program's SavedModel lands in
        its `saved_model/` (`KFDIST_MODEL_DIR`).
      command: The program and its arguments.
      framework: `tensorflow` or `pytorch`.
      workers: Worker replicas (PyTorch: nodes).
      ps: TensorFlow parameter servers.
      chief: Add a TensorFlow chief.
      evaluator: Add a TensorFlow evaluator.
      procs_per_worker: PyTorch processes per node.
      restart_policy: `Never`, `OnFailure` or `ExitCode`; empty: `ExitCode`, `OnFailure` for
        an MPI program, a TrainJob's runtime's (`program_cluster.default_restart_policy`).
      backoff_limit: Restarts allowed before the step fails.
      active_deadline_seconds: The job fails once it ran this long (None: no deadline).
      mpi: An MPI program: one `mpirun` over `workers x procs_per_worker` ranks.
      backend: `local` (processes here), `tfjob`, `pytorchjob`, `trainjob` or `mpijob`
        (`program_step_cluster`).
      stage: On a cluster, give the program local directories for the remote ones.
      cluster: The cluster settings of a cluster backend.
      dataset_uri: The dataset artifact's URI (a cluster's replicas read a remote one in place).
      log: Receives every replica line and the step's own lines.

    Returns:
      The `ProgramReport`, also written into the artifact.

    Raises:
      InvalidInputError: On a bad parameter or a dataset that is not a kfdist dataset.
      TrainingFailedError: If the job failed, or the program wrote no SavedModel or one whose
        serving signature does not take the dataset's examples (`signature_check`).
    """
    meta = dataset_spec.load_metadata(dataset_dir)
    saved = os.path.join(model_dir, ma.SAVED_MODEL_DIR)
    if backend == AUTO:
        from kfdist.components.launch_program.program_backend import choose_program_backend

        backend = choose_program_backend(framework, log, mpi=mpi)
    job = ProgramJob(framework=framework, command=tuple(command), workers=workers, ps=ps,
                     chief=chief, evaluator=evaluator, procs_per_worker=procs_per_worker,
                     model_dir=saved, checkpoint_dir=os.path.join(model_dir, ma.CHECKPOINTS_DIR),
                     data_dir=dataset_dir, backoff_limit=backoff_limit,
                     restart_policy=restart_policy or default_restart_policy(framework, mpi,
                                                                             backend),
                     active_deadline_seconds=active_deadline_seconds, mpi=mpi)
    started = time.monotonic()
    if backend == LOCAL:
        restarts = run_local(job, log).restarts
    else:
        from kfdist.components.launch_program.program_step_cluster import run_on_cluster
        from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

        restarts = run_on_cluster(job, backend, cluster or ClusterOptions(),
                                  dataset_dir=dataset_dir, dataset_uri=dataset_uri,
                                  saved_model_dir=saved, stage=stage, log=log)
    wall = time.monotonic() - started
    if not os.path.isfile(os.path.join(saved, "saved_model.pb")):
        raise TrainingFailedError(
            f"the program succeeded but wrote no SavedModel into KFDIST_MODEL_DIR ({saved}); "
            "save the trained Keras model there (`kfdist.program.save_model(model)` in every "
            "replica: the leader's copy is kept)")
    unfit = signature_check.mismatch(saved, meta)
    if unfit is not None:
        raise TrainingFailedError(f"the program's SavedModel ({saved}) cannot be evaluated: "
                                  f"{unfit}")
    with open(os.path.join(model_dir, ma.DATASET_METADATA_FILE), "w") as f:
        f.write(meta.to_json())
    dataset_statistics.copy_statistics(dataset_dir,
                                       os.path.join(model_dir, ma.DATASET_STATISTICS_FILE))
    serving = _build_serving_model(saved, meta, os.path.join(model_dir, ma.SERVING_MODEL_DIR), log)
    report = ProgramReport(command=list(command), framework=framework,
                           replicas=job.replica_count, restarts=restarts,
                           wall_seconds=round(wall, 3), serving_model=serving, backend=backend)
    with open(os.path.join(model_dir, PROGRAM_REPORT_FILE), "w") as f:
        f.write(report.to_json())
    log(f"program succeeded in {wall:.1f} s ({restarts} restart(s)); model: {saved}")
    return report


def _build_serving_model(saved: str, meta: dataset_spec.DatasetMetadata, out_dir: str,
                         log: Callable[[str], None]) -> bool:
    """Builds the serving SavedModel, or logs why not (the export step then says so too)."""
    from kfdist.components.common import serving_model

    try:
        serving_model.save_serving_model(saved, meta, out_dir)
        return True
    except Exception as err:  # noqa: BLE001  (the user's model: any failure is reported)
        log(f"the serving model could not be built from the program's SavedModel "
            f"({type(err).__name__}: {err}); the export step will try again and name the error")
        return False
