"""`kfdist launch`: runs a user's own TensorFlow or PyTorch program as a distributed job."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile

from kfdist import launch_notes, launch_shipping
from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.step_flags import add_step_flags, step_values
from kfdist.components.launch_program import (
    program_cluster, program_failures, program_files, program_job)
from kfdist.components.launch_program.pod_entry import SCRATCH_ENV
from kfdist.components.launch_program.program_cluster import PROGRAM_BACKENDS
from kfdist.components.launch_program.program_framework import choose_framework
from kfdist.components.launch_program.program_job import check_local_command
from kfdist.components.launch_program.user_env import parse_env_flags
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.job.strategy_rules import PVC_MOUNT_PATH
from kfdist.components.train_distributed.kubernetes.build.render_trainjob import (
    CUSTOMISATION_BY_RELEASE, RUNTIME_PATCHES)
from kfdist.run_program import program_default

#: The training step's cluster parameters that `launch` takes as they are (flags from
#: `job.step_params`); image, namespace, PVC and timeout have launch flags of their own.
CLUSTER_PARAMS = ("gpus_per_worker", "cpu_per_worker", "memory_per_worker", "node_selector",
                  "service_account", "queue_name", "timeout_from")


def add_launch_parser(sub) -> None:
    """Adds the `launch` subcommand to the `kfdist` parser's subparsers."""
    p = sub.add_parser(
        "launch", help="run your own training program with the operator's environment",
        description="Runs COMMAND in every replica with the environment the Kubeflow operator "
                    "injects (TF_CONFIG; or MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, PET_*), "
                    "plus KFDIST_MODEL_DIR, KFDIST_DATA_DIR and KFDIST_CHECKPOINT_DIR.")
    add_launch_flags(p)
    p.set_defaults(func=_cmd_launch)


def render_launch(args) -> int:
    """`kfdist render launch ...`: prints the job `kfdist launch` with the same flags creates
    (its `--dry-run`, with the TrainJob for `--trainer-version`)."""
    args.dry_run = True
    return _cmd_launch(args)


def _require_inputs(args, command: str) -> None:
    """Refuses `command` (`kfdist launch` or `kfdist render launch`) naming, in one line, every
    input it lacks: --output, the program after `--`, for a render a cluster --backend, and for a
    cluster job the image (--image or --program-dir)."""
    missing = []
    if args.output is None:
        missing.append("--output DIR (where the model and checkpoints go)")
    if command.startswith("kfdist render") and args.backend == "local":
        missing.append(f"--backend {' | '.join(b for b in PROGRAM_BACKENDS if b != 'local')} "
                       "(it prints a cluster job, not 'local')")
    cluster = command.startswith("kfdist render") or args.backend not in ("local", "auto")
    if cluster and not (args.image or args.program_dir):
        missing.append("--image IMAGE:TAG (the image that holds your program) or --program-dir "
                       "DIR (your program's directory, run in kfdist's runtime image)")
    if not [word for word in args.program if word != "--"]:
        missing.append("the program after `--`, e.g. `-- python train.py`")
    if missing:
        raise InvalidInputError(f"{command} needs {'; '.join(missing)}")


def add_launch_flags(p) -> None:
    """Every flag of `kfdist launch` (also `kfdist render launch`'s)."""
    p.add_argument("--framework", choices=program_job.FRAMEWORKS, default=None,
                   help="tensorflow (TF_CONFIG) or pytorch (MASTER_ADDR, RANK, ...); default: "
                        "the one COMMAND's Python file imports (read, not run), else "
                        f"{program_default('framework')}")
    p.add_argument("--backend", choices=PROGRAM_BACKENDS, default="local",
                   help="local processes, a TFJob, a PyTorchJob, a TrainJob (PyTorch on "
                        "torch-distributed; TensorFlow on kfdist-tensorflow, in an image that "
                        "holds kfdist), an MPIJob (--mpi), or auto: local without a Kubernetes "
                        "API, else an MPIJob for --mpi, a TFJob for TensorFlow and, for PyTorch, "
                        "a TrainJob where Trainer runs torch-distributed, else a PyTorchJob "
                        "(default: %(default)s)")
    p.add_argument("--workers", type=int, default=strategy_rules.DEFAULT_WORKER_COUNT,
                   help="TensorFlow workers, or PyTorch nodes (a master and workers-1 workers)")
    p.add_argument("--ps", type=int, default=0, help="TensorFlow parameter servers")
    p.add_argument("--chief", action="store_true", help="add a TensorFlow chief replica")
    p.add_argument("--evaluator", action="store_true", help="add a TensorFlow evaluator replica")
    p.add_argument("--procs-per-worker", type=int, default=1,
                   help="PyTorch processes per node (PET_NPROC_PER_NODE), or MPI ranks per "
                        "worker with --mpi")
    p.add_argument("--mpi", action="store_true",
                   help="an MPI program (Horovod): mpirun starts workers x procs-per-worker "
                        "ranks, as an MPIJob's launcher does (backends local, mpijob)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="set a variable in every replica, locally and in the cluster job's "
                        "containers (repeatable), e.g. --env TF_USE_LEGACY_KERAS=1")
    p.add_argument("--dataset", help="KFDIST_DATA_DIR: a directory or any URI")
    p.add_argument("--output",
                   help="directory for the model (OUTPUT/model) and checkpoints "
                        "(OUTPUT/checkpoints); required")
    p.add_argument("--restart-policy", choices=strategy_rules.RESTART_POLICIES,
                   help="default: ExitCode, OnFailure for an MPI program (an MPIJob's launcher "
                        "takes Never or OnFailure), and a TrainJob's runtime's (kfdist-tensorflow: "
                        "ExitCode; torch-distributed: OnFailure), which it cannot change")
    p.add_argument("--backoff-limit", type=int, default=program_default("backoff_limit"),
                   help="replica restarts allowed before the job fails (default: %(default)s)")
    p.add_argument("--timeout", type=float,
                   help="seconds before the job fails (no limit by default)")
    p.add_argument("--image", help="cluster backends: the image holding the program (with "
                   "--program-dir, --stage or a TensorFlow TrainJob it must hold kfdist too)")
    p.add_argument("--namespace", help="cluster backends: the job's namespace (default: the pod's, "
                   "else the kubeconfig context's, else `default`)")
    p.add_argument("--name", help="cluster backends: the job's name (a DNS-1035 label; default: "
                                  "kfdist-<tf|pt>-<hash of the command and --output>); running "
                                  "again under the same name re-attaches to the job")
    p.add_argument("--pvc-name", help="cluster backends: a PersistentVolumeClaim mounted into "
                   "every replica, on which --output (and a local --dataset) lie")
    p.add_argument("--pvc-mount-path", default=PVC_MOUNT_PATH,
                   help="where the replicas mount --pvc-name (default: %(default)s)")
    launch_shipping.add_shipping_flags(p)
    p.add_argument("--dry-run", action="store_true",
                   help="cluster backends: print the job as YAML instead of creating it")
    add_step_flags(p, lambda param: param.name in CLUSTER_PARAMS,
                   title="cluster backends (as the training step's)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def _cmd_launch(args) -> int:
    from kfdist.components.launch_program.local_launch import run_local

    _require_inputs(args, "kfdist render launch" if getattr(args, "render_what", None) == "launch"
                    else "kfdist launch")
    command = tuple(args.program[1:] if args.program[:1] == ["--"] else args.program)
    env = parse_env_flags(args.env)  # refused before anything is chosen or written
    if args.framework is None:  # said on stderr: `render launch` prints YAML on stdout
        args.framework = choose_framework(command, args.program_dir, program_default("framework"))
    if args.backend == "auto":
        from kfdist.components.launch_program.program_backend import choose_program_backend

        args.backend = choose_program_backend(args.framework, lambda line: print(line, flush=True),
                                              mpi=args.mpi)
    local = args.backend == "local"
    # On a cluster the paths are the replicas' (on the PVC), not this machine's.
    output = args.output if "://" in args.output or not local else os.path.abspath(args.output)
    data_dir = args.dataset
    if data_dir is not None and "://" not in data_dir and local:
        data_dir = os.path.abspath(data_dir)
    job = program_job.ProgramJob(
        framework=args.framework, command=command, workers=args.workers, ps=args.ps,
        chief=args.chief, evaluator=args.evaluator, procs_per_worker=args.procs_per_worker,
        model_dir=os.path.join(output, "model"), checkpoint_dir=os.path.join(output, "checkpoints"),
        data_dir=data_dir, backoff_limit=args.backoff_limit, active_deadline_seconds=args.timeout,
        restart_policy=args.restart_policy or program_cluster.default_restart_policy(
            args.framework, args.mpi, args.backend),
        mpi=args.mpi, env=env)
    job.validate()
    if args.requirements and not args.program_dir:
        raise InvalidInputError("--requirements are installed with the program --program-dir "
                                "ships; pass --program-dir DIR too")
    if args.program_dir:
        program_files.check_program(args.program_dir, args.requirements)
    if args.stage:
        launch_shipping.check_stage(args, job)
        if local and not args.program_dir:
            check_local_command(command)  # kfdist's entry is what the replicas start
    entry = launch_shipping.entry_options(args, output)
    if entry:
        job = dataclasses.replace(job, command=launch_shipping.entry_wrapped(
            command, entry, local))
    if not local:
        return _on_cluster(job, args)
    check_local_command(job.command)
    if storage.is_remote(output):
        storage.list_uris(storage.join(output, "model") + "/")  # a missing bucket, refused now
    with tempfile.TemporaryDirectory(prefix="kfdist-launch-") as scratch:
        if args.program_dir:
            program_files.ship(args.program_dir, args.requirements, output)
        extra = {SCRATCH_ENV: scratch} if entry else {}  # the replicas' copies, removed after
        result = run_local(job, lambda line: print(line, flush=True), extra,
                           program_failures.LAUNCH_LOCAL)
    return _succeeded(job, result.restarts, "")


def _succeeded(job, restarts: int, where: str) -> int:
    """Says on stderr that `job` succeeded, and that its model directory is empty when it is
    (where that can be read from here: `launch_notes`); returns the exit code, 0."""
    print(f"kfdist: job succeeded ({restarts} restart(s)); model directory: {job.model_dir}"
          f"{where}", file=sys.stderr)
    note = launch_notes.empty_model_note(job.model_dir, job.framework)
    if note is not None:
        print(note, file=sys.stderr, flush=True)
    return 0


def render_cluster_job(job, args, customisation: str = RUNTIME_PATCHES):
    """The TFJob, PyTorchJob, MPIJob or TrainJob `kfdist launch` creates for `job` (`--dry-run`
    prints it); `customisation` is the installed Trainer's pod-customisation field.

    Raises:
      InvalidInputError: A backend that does not run the framework, a missing --image or
        --name, or a directory the replicas cannot reach.
    """
    from kfdist.components.launch_program import program_cluster, program_pod

    program_cluster.check_backend(job, args.backend)
    if not (args.image or args.program_dir):
        raise InvalidInputError(f"backend {args.backend!r} needs --image (the image that holds "
                                "your program) or --program-dir (your program's directory, run in "
                                "kfdist's runtime image)")
    options = cluster_options(args)
    image = options.image_for(strategy_rules.HOROVOD if job.mpi
                              else strategy_rules.MULTI_WORKER_MIRRORED)
    placement = program_pod.placement_for(args.name or program_pod.default_job_name(job), image,
                                          options)
    placement.validate()
    placement.check_location("--output", args.output)
    if job.data_dir is not None and "://" not in job.data_dir:
        placement.check_location("--dataset", job.data_dir)
    return program_cluster.render(job, args.backend, placement, customisation)


def cluster_options(args) -> "ClusterOptions":
    """The cluster options of `launch`'s flags (an unset one is None), validated.

    Raises:
      InvalidInputError: Naming the first bad value.
    """
    from kfdist.components.train_distributed.kubernetes.client.pod_identity import default_namespace
    from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

    values = {k: v if k in ("gpus_per_worker", "node_selector", "timeout_from") else v or None
              for k, v in step_values(args).items() if k in CLUSTER_PARAMS}
    options = ClusterOptions(image=args.image, namespace=args.namespace or default_namespace(),
                             pvc_name=args.pvc_name, pvc_mount_path=args.pvc_mount_path,
                             timeout_seconds=args.timeout, **values)
    options.validate()
    return options


def _on_cluster(job, args) -> int:
    """Prints the job (`--dry-run`), or creates it and follows it to its end, as the training
    step does: re-attached when it exists, its leader's log streamed, deleted on Ctrl-C,
    SIGTERM or `--timeout`, failed with the operator's reason."""
    from kfdist.components.launch_program import program_cluster
    from kfdist.components.train_distributed.kubernetes.client import kube_api

    log = lambda line: print(line, flush=True)  # noqa: E731
    api = None
    customisation = CUSTOMISATION_BY_RELEASE[getattr(args, "trainer_version", None) or "2.3"]
    if args.backend == program_cluster.TRAINJOB and not args.dry_run:
        api = kube_api.KubeApi.from_environment()
        customisation = program_cluster.customisation_for(args.backend, api, log)
    rendered = render_cluster_job(job, args, customisation)
    if args.dry_run:
        from kfdist.yaml_text import to_yaml

        print(to_yaml(rendered.body, sort_keys=False), end="")
        return 0
    if args.program_dir:
        launch_shipping.ship_for_cluster(args)
    api = api or kube_api.KubeApi.from_environment()
    outcome = program_cluster.follow(rendered, api, timeout_seconds=args.timeout, log=log,
                                     timeout_from=args.timeout_from,
                                     wording=program_failures.LAUNCH_CLUSTER)
    return _succeeded(job, outcome.restarts, " (on the replicas' PVC or in the object store)")
