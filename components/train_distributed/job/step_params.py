"""The training step's parameters, defined once: name, type, default, meaning.

The `train_distributed` component, the `mnist` pipeline, `kfdist run`,
`kfdist train` and `kfdist render` take these (the CLI flags are generated
from them; the component's and the pipeline's signatures are tested equal to
them). `runtime.build_job` turns a set of values into the job.

Every parameter has a plain type, as KFP needs: an "unset" value (0 or empty)
means the strategy's or the cluster's default, because kfp's local runner
cannot pass None.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

from kfdist.components.common import kfp_object_store
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import config, strategy_rules


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of the training step.

    Attributes:
      name: Its name in the component, the pipeline and the runtime (`batch_size_per_replica`).
      default: Its default; its type is the parameter's (`dict` for a string map).
      help: What it means, for the CLI and the docs.
      choices: The valid values, when there is a closed set.
      cluster: Whether only the cluster backends (`tfjob`, `mpijob`, `trainjob`) read it.
      flag: The CLI flag, when it is not `--` + the name with dashes.
      pipeline_default: The compiled pipeline's default, when it differs from
        `default` (which the CLI, kfp.local runs and the component keep).
    """

    name: str
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]] = None
    cluster: bool = False
    flag: Optional[str] = None
    pipeline_default: Any = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


_RESTART_CHOICES = ("",) + strategy_rules.RESTART_POLICIES

#: Every parameter of the training step, in the component's order.
TRAIN_STEP_PARAMS: Tuple[Param, ...] = (
    Param("backend", strategy_rules.LOCAL_BACKEND, "where the replicas run: local processes, a TFJob, "
          "an MPIJob, a Kubeflow Trainer TrainJob, or auto: a TrainJob where Kubeflow Trainer and "
          "kfdist's runtimes are installed, else a TFJob/MPIJob (local without a cluster)",
          choices=strategy_rules.BACKENDS + (strategy_rules.AUTO_BACKEND,),
          pipeline_default=strategy_rules.AUTO_BACKEND),
    Param("strategy", strategy_rules.MULTI_WORKER_MIRRORED, "distribution strategy",
          choices=strategy_rules.STRATEGIES),
    Param("workers", 0, "worker replicas; 0: the strategy's default (1 for mirrored, else 2)"),
    Param("model_name", "", "mnist_mlp, mnist_cnn, image_cnn, tabular_mlp or "
          "package.module:function; empty: chosen by the data (mnist_mlp for MNIST's 28x28 "
          "images, image_cnn for other images, tabular_mlp for tables)", flag="--model"),
    Param("epochs", 10, "passes over the train split"),
    Param("batch_size_per_replica", 64, "examples per replica per step (lowered for a train "
          "split smaller than one global batch)", flag="--batch-size"),
    Param("learning_rate", 0.001, "Adam learning rate"),
    Param("seed", 42, "seed of initialisation, dropout and shuffling"),
    Param("ps", 0, "parameter servers (parameter_server); 0: the strategy's default (1 there)"),
    Param("chief", False, "add a chief replica (multi_worker_mirrored)"),
    Param("evaluator", False, "add a side-car evaluator (not with horovod)"),
    Param("slots_per_worker", 1, "MPI ranks per worker (horovod)"),
    Param("restart_policy", "", "what happens to a failed replica; empty: ExitCode, or "
          "OnFailure for horovod", choices=_RESTART_CHOICES),
    Param("backoff_limit", 6, "replica restarts allowed before the job fails"),
    Param("active_deadline_seconds", 0, "the job fails once it has run this long; 0: no deadline"),
    Param("input_sharding", "auto", "how workers split the training files",
          choices=strategy_rules.INPUT_SHARDINGS),
    Param("steps_per_execution", config.STEPS_PER_EXECUTION, "training steps per call of the "
          "compiled train function (one TensorFlow loop, not a Python round trip per step); "
          "1: a call per step"),
    Param("early_stopping_patience", config.EARLY_STOPPING_PATIENCE, "epochs without a lower "
          "loss on the validation part (by more than early_stopping_min_delta) before training "
          "stops; the last epoch that lowered it is the one kept and exported; 0: no early "
          "stopping (every epoch on the whole train split, the last one kept)"),
    Param("validation_fraction", config.VALIDATION_FRACTION, "share of the train split set "
          "aside (every n-th example, the same in every run) to score each epoch for early "
          "stopping; never the held-out eval split"),
    Param("early_stopping_min_delta", config.EARLY_STOPPING_MIN_DELTA, "how far below the "
          "best loss on the validation part an epoch's must be to count as lower (Keras's "
          "min_delta); 0: any lower loss"),
    Param("image", "", "replica image with a pinned tag; empty: kfdist's image for the backend",
          cluster=True),
    Param("namespace", "", "namespace of the job; empty: the step's own", cluster=True),
    Param("work_uri", "", "gs://, s3:// or minio:// prefix or PVC path where the step and the "
          "replicas exchange job, dataset and model; empty: beside a remote dataset", cluster=True),
    Param("pvc_name", "", "PersistentVolumeClaim mounted into the step's replicas at "
          f"{strategy_rules.PVC_MOUNT_PATH} (use with a work_uri under it)", cluster=True),
    Param("gpus_per_worker", 0, "nvidia.com/gpu per worker", cluster=True),
    Param("cpu_per_worker", "", "CPU request and limit per worker, e.g. 4 or 500m", cluster=True),
    Param("memory_per_worker", "", "memory request and limit per worker, e.g. 8Gi", cluster=True),
    Param("node_selector", {}, "node labels the replicas require", cluster=True),
    Param("service_account", "", "service account of the replica pods", cluster=True),
    Param("object_store_secret", kfp_object_store.SECRET_NAME, "Secret whose keys "
          f"{' and '.join(kfp_object_store.SECRET_KEYS.values())} the replicas get as "
          f"{' and '.join(kfp_object_store.SECRET_KEYS)} (optional: none without the Secret) "
          "when the work location or the dataset is on s3:// or minio://, beside the step's "
          "AWS_ENDPOINT_URL(_S3) and AWS_REGION; empty: no keys", cluster=True),
    Param("timeout_seconds", 86400, "the job is deleted and the step fails after this long",
          cluster=True),
    Param("queue_name", "", "Kueue LocalQueue to submit the job to (the label "
          "kueue.x-k8s.io/queue-name); empty: not queued", cluster=True),
    Param("timeout_from", "creation", "when timeout_seconds starts: at the job's creation, or at "
          "its admission by Kueue", choices=("creation", "admission"), cluster=True),
    Param("run_id", "", "KFP run id (the pipeline passes it); names the job so a retried step "
          "finds it", cluster=True),
    Param("task_name", "", "KFP task name (the pipeline passes it)", cluster=True),
)
PARAMS_BY_NAME: Dict[str, Param] = {p.name: p for p in TRAIN_STEP_PARAMS}


def defaults() -> Dict[str, Any]:
    """Every parameter's default, by name (a fresh copy)."""
    return {p.name: (dict(p.default) if isinstance(p.default, dict) else p.default)
            for p in TRAIN_STEP_PARAMS}


def complete(values: Mapping[str, Any]) -> Dict[str, Any]:
    """`values` with every parameter left out at its default.

    Raises:
      InvalidInputError: On a name that is not a training-step parameter (listing the valid ones).
    """
    unknown = sorted(set(values) - set(PARAMS_BY_NAME))
    if unknown:
        raise InvalidInputError(f"unknown training settings {unknown}; valid: {sorted(PARAMS_BY_NAME)}")
    merged = defaults()
    merged.update(values)
    return merged
