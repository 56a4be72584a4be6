"""`kfdist launch`: runs a user's own TensorFlow or PyTorch program as a distributed job."""

from __future__ import annotations

import argparse
import os
import sys

from kfdist.components.launch_program import program_job
from kfdist.components.train_distributed.job import strategy_rules

BACKENDS = ("local",)


def add_launch_parser(sub) -> None:
    """Adds the `launch` subcommand to the `kfdist` parser's subparsers."""
    p = sub.add_parser(
        "launch", help="run your own training program with the operator's environment",
        description="Runs COMMAND in every replica with the environment the Kubeflow operator "
                    "injects (TF_CONFIG; or MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, PET_*), "
                    "plus KFDIST_MODEL_DIR, KFDIST_DATA_DIR and KFDIST_CHECKPOINT_DIR.")
    p.add_argument("--framework", choices=program_job.FRAMEWORKS, required=True)
    p.add_argument("--backend", choices=BACKENDS, default="local")
    p.add_argument("--workers", type=int, default=strategy_rules.DEFAULT_WORKER_COUNT,
                   help="TensorFlow workers, or PyTorch nodes (a master and workers-1 workers)")
    p.add_argument("--ps", type=int, default=0, help="TensorFlow parameter servers")
    p.add_argument("--chief", action="store_true", help="add a TensorFlow chief replica")
    p.add_argument("--evaluator", action="store_true", help="add a TensorFlow evaluator replica")
    p.add_argument("--procs-per-worker", type=int, default=1,
                   help="PyTorch processes per node (PET_NPROC_PER_NODE)")
    p.add_argument("--dataset", help="KFDIST_DATA_DIR: a directory or any URI")
    p.add_argument("--output", required=True,
                   help="directory for the model (OUTPUT/model) and checkpoints (OUTPUT/checkpoints)")
    p.add_argument("--restart-policy", choices=strategy_rules.RESTART_POLICIES, default="ExitCode")
    p.add_argument("--backoff-limit", type=int, default=6)
    p.add_argument("--timeout", type=float, help="seconds before the job fails (no limit by default)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=_cmd_launch)


def _cmd_launch(args) -> int:
    from kfdist.components.launch_program.local_launch import run_local

    command = tuple(args.program[1:] if args.program[:1] == ["--"] else args.program)
    output = os.path.abspath(args.output)
    data_dir = args.dataset
    if data_dir is not None and "://" not in data_dir:
        data_dir = os.path.abspath(data_dir)
    job = program_job.ProgramJob(
        framework=args.framework, command=command, workers=args.workers, ps=args.ps,
        chief=args.chief, evaluator=args.evaluator, procs_per_worker=args.procs_per_worker,
        model_dir=os.path.join(output, "model"), checkpoint_dir=os.path.join(output, "checkpoints"),
        data_dir=data_dir, restart_policy=args.restart_policy, backoff_limit=args.backoff_limit,
        active_deadline_seconds=args.timeout)
    result = run_local(job, lambda line: print(line, flush=True))
    print(f"kfdist: job succeeded ({result.restarts} restart(s)); model directory: "
          f"{job.model_dir}", file=sys.stderr)
    return 0
