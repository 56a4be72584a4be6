"""`kfdist launch`'s shipping of a program: `--program-dir` (shipped to OUTPUT/program) and
`--stage` (local directories for remote ones), both run through kfdist's entry (`pod_entry`)."""

from __future__ import annotations

import os
import sys

from kfdist.components.launch_program import program_files, staging
from kfdist.components.launch_program.pod_entry import entry_command


def add_shipping_flags(p) -> None:
    """The flags that ship a program directory and stage the job's directories."""
    p.add_argument("--program-dir",
                   help="a directory holding your program: kfdist ships it to OUTPUT/program and "
                        "every replica runs COMMAND in its own copy of it, on a cluster in "
                        "kfdist's runtime image unless --image (no image to build)")
    p.add_argument("--requirements",
                   help="with --program-dir: a requirements file of pinned packages "
                        "(name==version) that every replica installs when it starts")
    p.add_argument("--stage", action="store_true",
                   help="for a program that reads and writes only local paths: every replica "
                        "gets local KFDIST_* directories for the remote (gs://, s3://, minio://) "
                        "ones (the dataset "
                        "downloaded, the checkpoints downloaded and the leader's uploaded every "
                        "--sync-seconds and at its end, the leader's model uploaded when it "
                        "succeeds); on a cluster the image must hold kfdist")
    p.add_argument("--sync-seconds", type=float, default=staging.DEFAULT_SYNC_SECONDS,
                   help="with --stage: how often the leader's checkpoints are uploaded "
                        "(default: %(default)s)")


def entry_options(args, output: str) -> list:
    """The options of kfdist's entry (`pod_entry`) that --program-dir and --stage ask for."""
    options = []
    if args.program_dir:
        options += ["--program", program_files.program_uri(output)]
    if args.stage:
        options += ["--stage", f"{args.sync_seconds:g}"]
    return options


def entry_wrapped(command, options: list, local: bool) -> tuple:
    """COMMAND run by `pod_entry` with `options` (the image's `python` on a cluster, this one
    here)."""
    python = sys.executable if local else "python"
    return tuple(entry_command(python, options, list(command)))


def check_stage(args, job) -> None:
    """Refuses --stage where it would do nothing, or where kfdist's entry does not start the
    ranks (an MPI program's are started by mpirun on the workers)."""
    from kfdist.components.common.errors import InvalidInputError

    if job.mpi:
        raise InvalidInputError("--stage is not for --mpi: mpirun starts the ranks on the "
                                "workers, where kfdist's entry does not run; give the program "
                                "remote (gs://, s3://) locations it writes itself, or the PVC")
    if not any("://" in (where or "") for where in (args.output, args.dataset)):
        dataset = "" if args.dataset is None else f" and --dataset {args.dataset!r}"
        raise InvalidInputError(f"--stage stages remote locations, and --output {args.output!r}"
                                f"{dataset} are not: pass a gs://, s3:// or minio:// --output, or "
                                "leave --stage out")
    if not args.sync_seconds > 0:
        raise InvalidInputError(f"--sync-seconds must be > 0, got {args.sync_seconds:g}")


def ship_for_cluster(args) -> None:
    """Ships --program-dir to OUTPUT/program: an object store, or the PVC where it is mounted here
    too (a pipeline step's pod); refused before the job is created otherwise."""
    from kfdist.components.common.errors import InvalidInputError

    if "://" not in args.output and not os.path.isdir(args.pvc_mount_path):
        raise InvalidInputError(
            f"--program-dir is shipped through --output {args.output!r}, on the PVC "
            f"{args.pvc_name!r}, which is not mounted here at {args.pvc_mount_path}: use a gs://, "
            "s3:// or minio:// --output, or launch where the PVC is mounted (a pipeline step)")
    program_files.ship(args.program_dir, args.requirements, args.output)
