"""kfdist's Kubeflow Trainer runtimes, and what a TrainJob on them can and cannot set.

The ClusterTrainingRuntimes in `manifests/runtimes/` (a test holds them to
these constants):

* `kfdist-tensorflow` (plain ML policy): one replicated Job `node`, an
  Indexed Job of `numNodes` pods, each one TensorFlow replica; the replica
  derives its TF_CONFIG from its index (`job.jobset_cluster`). The Job
  succeeds when pod 0 (the chief, or worker 0) does, ending the parameter
  servers and the evaluator as the Training Operator's success policy would;
  its pod failure policy is the operators' `ExitCode`: exit codes 1-127 fail
  the job, others (killed, peer lost) re-create the pod, up to the backoff
  limit.
* `kfdist-horovod` (`mpi` policy, OpenMPI, launcher as a node): Job
  `launcher` runs `mpirun` (and ranks), after every pod of Job `node` (sshd)
  is Ready; Trainer writes the hostfile and the SSH keys. The launcher's
  container restarts on failure (`OnFailure`), up to the backoff limit.

A TrainJob cannot change a runtime's Job specs (only pods, through
`runtimePatches`), so these settings are the runtime's, and a step that asks
for others is told to edit the runtime instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from kfdist.images import image as kfdist_image
from kfdist.components.common.errors import require
from kfdist.components.train_distributed.job import strategy_rules

if TYPE_CHECKING:
    from kfdist.components.train_distributed.kubernetes.build.job_spec import ClusterJobSpec

TF_RUNTIME = "kfdist-tensorflow"
HOROVOD_RUNTIME = "kfdist-horovod"
#: The container Trainer puts `spec.trainer` into, in both runtimes.
NODE_CONTAINER = "node"
#: The replicated Jobs of each runtime, in the runtime's order.
REPLICATED_JOBS: Dict[str, tuple] = {TF_RUNTIME: ("node",), HOROVOD_RUNTIME: ("node", "launcher")}
#: Each runtime's kfdist image (the TrainJob's `trainer.image` replaces it where Trainer allows).
RUNTIME_IMAGE_NAMES: Dict[str, str] = {TF_RUNTIME: "runtime", HOROVOD_RUNTIME: "horovod"}
#: What the runtimes fix for every TrainJob.
RESTART_POLICIES: Dict[str, str] = {TF_RUNTIME: "ExitCode", HOROVOD_RUNTIME: "OnFailure"}
BACKOFF_LIMIT = 6


def runtime_for(strategy: str) -> str:
    """The kfdist runtime that runs `strategy`."""
    return HOROVOD_RUNTIME if strategy == strategy_rules.HOROVOD else TF_RUNTIME


def node_count(spec: "ClusterJobSpec") -> int:
    """`trainer.numNodes`: every TensorFlow replica, or the Horovod workers."""
    if spec.strategy == strategy_rules.HOROVOD:
        return spec.layout.workers
    return sum(spec.layout.replica_counts(spec.strategy).values())


def pod_names(spec: "ClusterJobSpec") -> list:
    """The longest pod names JobSet derives (`<name>-<job>-0-<i>-<5 random>`), per replicated Job."""
    if spec.strategy == strategy_rules.HOROVOD:
        nodes = max(spec.layout.workers - 1, 1)  # the launcher is a node too
        return [f"{spec.name}-node-0-{nodes - 1}-xxxxx", f"{spec.name}-launcher-0-0-xxxxx"]
    return [f"{spec.name}-node-0-{node_count(spec) - 1}-xxxxx"]


def check_fits_runtime(spec: "ClusterJobSpec") -> None:
    """Rejects what a TrainJob on kfdist's runtime cannot carry.

    Raises:
      InvalidInputError: Naming the setting, the runtime's value and where to change it.
    """
    runtime = runtime_for(spec.strategy)
    layout = spec.layout
    policy = RESTART_POLICIES[runtime]
    require(layout.restart_policy == policy,
            f"restart_policy={layout.restart_policy!r}: a TrainJob's replicas follow its runtime "
            f"{runtime}, whose policy is {policy!r}; leave restart_policy empty, or use backend "
            "tfjob/mpijob")
    require(layout.backoff_limit == BACKOFF_LIMIT,
            f"backoff_limit={layout.backoff_limit!r}: a TrainJob takes the backoff limit of its "
            f"runtime {runtime} ({BACKOFF_LIMIT}); edit the runtime's replicatedJobs to change it")
    require(layout.success_policy is None,
            f"success_policy={layout.success_policy!r}: on a TrainJob pod 0 decides (runtime "
            f"{runtime}); leave it unset")
    require(not spec.overrides, f"per-replica overrides {sorted(spec.overrides)}: every node of "
            f"a TrainJob gets the same resources (trainer.resourcesPerNode); use backend tfjob")
    require(spec.mpi_implementation in (None, "OpenMPI"),
            f"mpi_implementation={spec.mpi_implementation!r}: Kubeflow Trainer runs OpenMPI only")
    require(spec.ssh_auth_mount_path is None, "ssh_auth_mount_path is set by the runtime "
            f"{HOROVOD_RUNTIME} on a TrainJob; leave it unset")
    if spec.strategy == strategy_rules.HOROVOD:
        horovod_image = kfdist_image("horovod")
        require(spec.image == horovod_image,
                f"image {spec.image!r}: Trainer puts a TrainJob's image into the launcher only, "
                f"and the runtime {HOROVOD_RUNTIME} runs {horovod_image} on the nodes; edit both "
                "images in the runtime (or use backend mpijob) to run another")
