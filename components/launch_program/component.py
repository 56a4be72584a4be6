"""KFP interface of `train_program`; the work is done by `program_step.train_program`."""

from typing import List

from kfp import dsl

from kfdist import RUNTIME_IMAGE


@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False)
def train_program(
    dataset: dsl.Input[dsl.Dataset],
    model: dsl.Output[dsl.Model],
    metrics: dsl.Output[dsl.Metrics],
    command: List[str],
    framework: str = "tensorflow",
    workers: int = 2,
    ps: int = 0,
    chief: bool = False,
    evaluator: bool = False,
    procs_per_worker: int = 1,
    restart_policy: str = "ExitCode",
    backoff_limit: int = 6,
    active_deadline_seconds: int = 0,
):
    """Trains with your own TensorFlow or PyTorch program instead of kfdist's models.

    Every replica runs `command` unchanged with the environment the Kubeflow
    Training Operator injects (TF_CONFIG; or MASTER_ADDR, MASTER_PORT,
    WORLD_SIZE, RANK and PET_*) and `KFDIST_DATA_DIR` (the dataset),
    `KFDIST_MODEL_DIR` (where the leader saves its Keras SavedModel) and
    `KFDIST_CHECKPOINT_DIR` (shared, kept across restarts); `kfdist.program`
    reads them. The model artifact then holds what `evaluate_model` and
    `export_saved_model` take, as `train_distributed`'s does.

    Args:
        dataset: Sharded dataset written by `shard_dataset` (`KFDIST_DATA_DIR`).
        model: Output model: the program's `saved_model/`, the dataset metadata,
            the serving SavedModel built from them, `checkpoints/` and
            `program_report.json`.
        metrics: The replicas, restarts and wall time of the run.
        command: The program and its arguments, e.g. `["python", "/app/train.py"]`.
        framework: `tensorflow` or `pytorch`.
        workers: TensorFlow worker replicas, or PyTorch nodes (a master and
            `workers - 1` workers).
        ps: TensorFlow parameter servers.
        chief: Add a TensorFlow chief replica.
        evaluator: Add a TensorFlow evaluator replica.
        procs_per_worker: PyTorch processes per node (`PET_NPROC_PER_NODE`).
        restart_policy: What happens to a failed replica: `Never`, `OnFailure`
            or `ExitCode` (restarted when killed or when it lost a peer: exit
            codes 128-255), as the operators define them.
        backoff_limit: Replica restarts allowed before the step fails.
        active_deadline_seconds: The job fails once it has run this long; 0: no
            deadline.
    """
    from kfdist.components.launch_program import program_step

    report = program_step.train_program(
        dataset.path, model.path, command, framework=framework, workers=workers, ps=ps,
        chief=chief, evaluator=evaluator, procs_per_worker=procs_per_worker,
        restart_policy=restart_policy, backoff_limit=backoff_limit,
        active_deadline_seconds=active_deadline_seconds or None)
    metrics.log_metric("replicas", report.replicas)
    metrics.log_metric("restarts", report.restarts)
    metrics.log_metric("training_seconds", report.wall_seconds)
