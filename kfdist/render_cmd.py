"""`kfdist render`: print the TFJob or MPIJob a training step would create, as YAML.

Nothing is sent to a cluster: this is for reviewing a job, or for applying it
by hand with `kubectl apply -f -`. Examples:

    kfdist render --backend tfjob --strategy multi_worker_mirrored --workers 3 --chief \\
        --gpus-per-worker 4 --image gcr.io/proj/trainer:1.0
    kfdist render --backend mpijob --strategy horovod --workers 4 --slots-per-worker 2 \\
        --gpus-per-worker 2 --image gcr.io/proj/horovod:1.0 -- python -m trainer
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional

import yaml

from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.train_distributed.kubernetes.build.job_parts import PvcMount, Resources, RunPolicy
from kfdist.components.train_distributed.kubernetes.build.job_spec import (
    STRATEGIES_BY_CLUSTER_BACKEND, ClusterJobSpec, job_name_for, run_labels)
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob

#: Where replicas meet when neither a command nor --work-uri is given (a PVC path).
DEFAULT_WORK_ROOT = "/mnt/kfdist/jobs"


def _success_policy(args):
    from kfdist.components.train_distributed.job.config import default_success_policy

    if args.success_policy is not None or args.backend != "tfjob" or args.chief:
        return args.success_policy
    return default_success_policy(args.strategy) or None


def _default_command(args) -> tuple:
    from kfdist.components.train_distributed.job.work_location import replica_command

    name = args.name or job_name_for(args.run_id, args.task_name)
    return tuple(replica_command(args.work_uri or f"{DEFAULT_WORK_ROOT}/{name}"))


def add_render_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the `render` command to the `kfdist` subparsers.

    Args:
      subparsers: What `ArgumentParser.add_subparsers()` returned.

    Returns:
      The `render` parser (its handler is `run_render`, set as `func`).
    """
    p = subparsers.add_parser("render", help="print the TFJob/MPIJob for a training step (no cluster)",
                              description=__doc__.split("\n")[0])
    p.add_argument("--backend", required=True, choices=sorted(STRATEGIES_BY_CLUSTER_BACKEND))
    p.add_argument("--strategy", required=True,
                   help="multi_worker_mirrored, parameter_server, mirrored (tfjob); horovod (mpijob)")
    p.add_argument("--workers", type=int, required=True, help="worker replicas")
    p.add_argument("--ps", type=int, default=0, help="parameter servers (parameter_server only)")
    p.add_argument("--chief", action="store_true", help="add a Chief replica (tfjob)")
    p.add_argument("--evaluator", action="store_true", help="add an Evaluator replica (tfjob)")
    p.add_argument("--gpus-per-worker", type=int, default=0, help="nvidia.com/gpu per worker")
    p.add_argument("--cpu-per-worker", default=None, help="CPU request and limit per worker, e.g. 4 or 500m")
    p.add_argument("--memory-per-worker", default=None, help="memory request and limit per worker, e.g. 8Gi")
    p.add_argument("--slots-per-worker", type=int, default=None, help="MPI processes per worker (mpijob)")
    p.add_argument("--mpi-implementation", default=None, help="OpenMPI (default), Intel or MPICH (mpijob)")
    p.add_argument("--ssh-auth-mount-path", default=None, help="SSH key mount path (mpijob v2beta1)")
    p.add_argument("--work-uri", default=None,
                   help="shared location (gs:// or a PVC path) of the job's files, which the "
                        f"default replica command reads (default: {DEFAULT_WORK_ROOT}/NAME)")
    p.add_argument("--image", required=True, help="replica image with a pinned tag or digest")
    p.add_argument("--name", default=None, help="job name (default: derived from --run-id and --task-name)")
    p.add_argument("--run-id", default="local", help="KFP run id, for the default name and labels")
    p.add_argument("--task-name", default="train-distributed", help="KFP task name, ditto")
    p.add_argument("--namespace", default="default")
    p.add_argument("--mpi-api-version", default="v2beta1", choices=["v2beta1", "v1"])
    p.add_argument("--pvc", action="append", default=[], metavar="CLAIM:/MOUNT/PATH",
                   help="mount a PVC in every replica (repeatable; append ':ro' for read-only)")
    p.add_argument("--node-selector", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--data-uri", default=None, help="dataset location (KFDIST_DATA_URI)")
    p.add_argument("--model-uri", default=None, help="model location (KFDIST_MODEL_URI)")
    p.add_argument("--service-account", default=None)
    p.add_argument("--image-pull-secret", action="append", default=[])
    p.add_argument("--restart-policy", default="Never", help="Never, OnFailure, ExitCode, Always")
    p.add_argument("--success-policy", default=None,
                   help="AllWorkers (tfjob); default, as the training step does: AllWorkers for a "
                        "TFJob without a chief, else the operator's default")
    p.add_argument("--active-deadline-seconds", type=int, default=None)
    p.add_argument("--ttl-seconds-after-finished", type=int, default=None)
    p.add_argument("--backoff-limit", type=int, default=None)
    p.add_argument("--clean-pod-policy", default="Running", help="None, Running (default) or All")
    p.add_argument("--istio-sidecar", action="store_true", help="allow Istio sidecar injection")
    p.add_argument("replica_command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="after '--': the program every replica (MPI rank) runs "
                        "(default: kfdist's shared-job replica reading --work-uri)")
    p.set_defaults(func=run_render)
    return p


def _pairs(flag: str, values: List[str]) -> Dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, item = value.partition("=")
        require(bool(sep) and bool(key), f"{flag} {value!r} must look like KEY=VALUE")
        pairs[key] = item
    return pairs


def _pvc(value: str) -> PvcMount:
    claim, sep, path = value.partition(":")
    read_only = path.endswith(":ro")
    path = path[:-3] if read_only else path
    require(bool(sep) and bool(claim) and bool(path),
            f"--pvc {value!r} must look like CLAIM:/MOUNT/PATH[:ro]")
    return PvcMount(claim_name=claim, mount_path=path, read_only=read_only)


def spec_from_args(args: argparse.Namespace) -> ClusterJobSpec:
    """Builds the job description from parsed `kfdist render` arguments (not yet validated)."""
    command = list(args.replica_command)
    if command[:1] == ["--"]:
        command = command[1:]
    per_worker = Resources(cpu=args.cpu_per_worker, memory=args.memory_per_worker,
                           cpu_limit=args.cpu_per_worker, memory_limit=args.memory_per_worker,
                           gpus=args.gpus_per_worker)
    labels = {**run_labels(args.run_id, args.task_name), **_pairs("--label", args.label)}
    return ClusterJobSpec(
        name=args.name or job_name_for(args.run_id, args.task_name), namespace=args.namespace,
        backend=args.backend, strategy=args.strategy, image=args.image,
        command=tuple(command) or _default_command(args), env=_pairs("--env", args.env),
        workers=args.workers, ps=args.ps, chief=args.chief, evaluator=args.evaluator,
        resources=per_worker, slots_per_worker=args.slots_per_worker,
        mpi_implementation=args.mpi_implementation, ssh_auth_mount_path=args.ssh_auth_mount_path,
        restart_policy=args.restart_policy,
        run_policy=RunPolicy(clean_pod_policy=args.clean_pod_policy,
                             ttl_seconds_after_finished=args.ttl_seconds_after_finished,
                             active_deadline_seconds=args.active_deadline_seconds,
                             backoff_limit=args.backoff_limit),
        success_policy=_success_policy(args), node_selector=_pairs("--node-selector", args.node_selector),
        volumes=tuple(_pvc(v) for v in args.pvc), data_uri=args.data_uri, model_uri=args.model_uri,
        service_account=args.service_account, image_pull_secrets=tuple(args.image_pull_secret),
        labels=labels, istio_sidecar=args.istio_sidecar)


def render_from_args(args: argparse.Namespace) -> RenderedJob:
    """Validates and renders the job `kfdist render` describes.

    Raises:
      InvalidInputError: Naming the first bad argument.
    """
    from kfdist.components.train_distributed.kubernetes.build.render_mpijob import render_mpijob
    from kfdist.components.train_distributed.kubernetes.build.render_tfjob import render_tfjob

    spec = spec_from_args(args)
    if spec.backend == "mpijob":
        return render_mpijob(spec, api_version=args.mpi_api_version)
    if spec.backend == "tfjob":
        return render_tfjob(spec)
    raise InvalidInputError(f"unknown backend {spec.backend!r}")


def run_render(args: argparse.Namespace) -> int:
    """Handler of `kfdist render`: prints the rendered job as YAML; returns 0.

    Raises:
      InvalidInputError: On bad input (the `kfdist` CLI prints it and exits 2).
    """
    rendered = render_from_args(args)
    sys.stdout.write(yaml.safe_dump(rendered.body, sort_keys=False, default_flow_style=False))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Runs `render` alone (for tests and debugging): `python -m kfdist.render_cmd ...`."""
    parser = argparse.ArgumentParser(prog="kfdist")
    add_render_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["render"] + list(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except InvalidInputError as err:
        print(f"kfdist: invalid input: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
