"""What every kfdist pipeline step gets on a cluster, the steps' short names and gates.

Set through kfp-kubernetes, so the compiled YAML carries it as KFP platform
config (no hand-written pod fields):

* labels `app.kubernetes.io/part-of: kfdist` and `kfdist.dev/step: <step>`,
  to find, select or account a run's step pods;
* a security context matching kfdist's images (uid/gid 1000, non-root);
* a preferred node affinity for nodes without NVIDIA GPUs: steps run CPU
  work or wait on a training job, and should not hold a GPU node's room
  (training replicas get GPUs through the job they create). The training
  steps pass their task's affinity to the job's replicas instead of their own
  pod (`kubernetes.task_settings`): there it keeps CPU-only replicas off GPU
  nodes, and is moot for replicas that request GPUs;
* the object store's keys: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the Secret the
  pipeline parameter `object_store_secret` names (Kubeflow Pipelines' own by default), an
  optional one, so a namespace without it still runs;
* caching: only the shard step, whose output depends on its parameters and
  the source's content alone; training, evaluation and export always run.
"""

from typing import Dict, Tuple

from kfp import dsl, kubernetes

from kfdist.components.common.kfp_object_store import SECRET_KEYS
from kfdist.components.train_distributed.kubernetes.client.pod_identity import STEP_POD_FIELDS

#: Short step names by task (component) name, as the UI and `kfdist run` show them.
STEP_NAMES: Dict[str, str] = {
    "shard-dataset": "shard",
    "train-distributed": "train",
    "evaluate-model": "evaluate",
    "export-saved-model": "export",
}
#: The step each pipeline condition gates, by its compiled task name, and why it is skipped
#: when the condition is false (`tests/unit/test_pipeline_compile.py` checks the layout).
CONDITIONAL_STEPS: Dict[str, Tuple[str, str]] = {
    "condition-1": ("export", "the model is not blessed"),
}
#: Steps whose outputs may be reused from an earlier run with the same inputs.
CACHED_STEPS = frozenset({"shard"})
#: uid and gid of the user kfdist's images run as (see containers/).
IMAGE_USER_ID = 1000
PART_OF_LABEL = ("app.kubernetes.io/part-of", "kfdist")
STEP_LABEL = "kfdist.dev/step"
#: Node label NVIDIA's GPU feature discovery puts on GPU nodes.
GPU_NODE_LABEL = "nvidia.com/gpu.present"
GPU_AVOIDANCE_WEIGHT = 100
#: The variables of the object store's keys, by the Secret's key holding each.
SECRET_ENV = {key: variable for variable, key in SECRET_KEYS.items()}


def configure(object_store_secret, **steps: dsl.PipelineTask) -> None:
    """Names, labels, secures, places, gives the object store's keys to and sets caching for
    each step's task.

    Args:
      object_store_secret: The Secret of the object store's keys: the pipeline parameter's
        channel (an empty value gives none).
      **steps: Tasks by step name (`shard=...`); each name must be one of
        `STEP_NAMES`' values.

    Raises:
      ValueError: If a step name is not a known step.
    """
    known = set(STEP_NAMES.values())
    for step, task in steps.items():
        if step not in known:
            raise ValueError(f"unknown step {step!r}; known steps: {sorted(known)}")
        task.set_display_name(step)
        task.set_caching_options(step in CACHED_STEPS)
        kubernetes.add_pod_label(task, *PART_OF_LABEL)
        kubernetes.add_pod_label(task, STEP_LABEL, step)
        kubernetes.set_security_context(task, run_as_user=IMAGE_USER_ID,
                                        run_as_group=IMAGE_USER_ID, run_as_non_root=True)
        kubernetes.use_secret_as_env(task, secret_name=object_store_secret,
                                     secret_key_to_env=SECRET_ENV, optional=True)
        kubernetes.add_node_affinity(
            task, match_expressions=[{"key": GPU_NODE_LABEL, "operator": "DoesNotExist"}],
            weight=GPU_AVOIDANCE_WEIGHT)
        if step == STEP_NAMES["train-distributed"]:
            # The launcher names its pod as the job's owner, so deleting the run's
            # pods garbage-collects any job left behind.
            for env_name, field_path in STEP_POD_FIELDS:
                kubernetes.use_field_path_as_env(task, env_name=env_name, field_path=field_path)
