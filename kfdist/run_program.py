"""`kfdist run program`: the training settings of the program pipeline (your own program).

`kfdist run` shares its training flags with kfdist's own pipelines where they
mean the same (`--workers`, `--ps`, `--restart-policy`, ...); these helpers
keep the two apart and check a program before the pipeline starts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any, Dict, List, Mapping, Sequence

from kfdist.components.common.errors import InvalidInputError

#: The sample the `program` pipeline runs on when no source is given.
SAMPLE_OF_PROGRAM = "mnist"
#: What `kfdist run` takes for the `program` pipeline beside the training flags they share.
PROGRAM_ONLY_SETTINGS = ("command", "framework", "procs_per_worker", "mpi", "stage")


def program_default(name: str) -> Any:
    """The default of the `train_program` step's parameter `name`: its signature is the one
    definition the program pipeline, `kfdist run program` and `kfdist launch` share."""
    from kfdist.step_defaults import step_defaults

    return step_defaults("kfdist.components.launch_program.component", "train_program")[name]


def add_program_flags(parser: argparse.ArgumentParser) -> None:
    """Adds `kfdist run`'s flags of the program pipeline (left out of the parsed arguments
    when not given, so the step's defaults apply)."""
    from kfdist.components.launch_program.program_job import FRAMEWORKS

    program = parser.add_argument_group("the program pipeline (your own training program, as "
                                        "kfdist launch runs it)")
    program.add_argument("--command", dest="program_command", default=argparse.SUPPRESS,
                         help="your program and its arguments, as a shell would split them, e.g. "
                              "'python train.py --epochs 4'")
    program.add_argument("--framework", choices=FRAMEWORKS, default=argparse.SUPPRESS,
                         help="tensorflow (TF_CONFIG) or pytorch (MASTER_ADDR, RANK, ...) "
                              f"(default: {program_default('framework')})")
    program.add_argument("--procs-per-worker", type=int, default=argparse.SUPPRESS,
                         help="PyTorch processes per node, or MPI ranks per worker with --mpi "
                              f"(default: {program_default('procs_per_worker')})")
    program.add_argument("--mpi", action="store_true", default=argparse.SUPPRESS,
                         help="an MPI program: one mpirun over workers x procs-per-worker ranks")
    program.add_argument("--stage", action="store_true", default=argparse.SUPPRESS,
                         help="cluster backends: give the program local directories for its "
                              "remote ones (see kfdist launch --stage)")


def _step_backends() -> tuple:
    """The backends `train_distributed` (kfdist's models) takes."""
    from kfdist.components.train_distributed.job.step_params import TRAIN_STEP_PARAMS

    return next(p.choices for p in TRAIN_STEP_PARAMS if p.name == "backend")


def run_backends() -> tuple:
    """`kfdist run --backend`'s choices: kfdist's models' backends and the program pipeline's."""
    from kfdist.components.launch_program.program_cluster import PROGRAM_BACKENDS

    return tuple(dict.fromkeys(_step_backends() + PROGRAM_BACKENDS))


def refuse_program_settings(pipeline: str, training: Mapping[str, Any]) -> None:
    """Raises `InvalidInputError` when a program-only setting is given to another pipeline."""
    models_backends = _step_backends()
    if training.get("backend", models_backends[0]) not in models_backends:
        raise InvalidInputError(
            f"--backend {training['backend']} runs your own program (the program pipeline, e.g. "
            f"a PyTorch one: --framework pytorch), not {pipeline!r}, which trains kfdist's "
            f"models; its backends: {list(models_backends)}")
    given = [name for name in PROGRAM_ONLY_SETTINGS if name in training]
    if given:
        raise InvalidInputError(
            f"--{given[0].replace('_', '-')} applies to the program pipeline (your own training "
            f"program), not to {pipeline!r}, which trains kfdist's models")


def program_training(definition, training: Mapping[str, Any]) -> Dict[str, Any]:
    """The `train_program` step's parameters: those given, else the step's defaults.

    Raises:
      InvalidInputError: On a training flag the step does not take, or no command.
    """
    from kfdist.components.train_distributed.job.step_params import PARAMS_BY_NAME
    from kfdist.pipelines.definition import OBJECT_STORE_SECRET
    from kfdist.pipelines.pipeline_factory import train_params

    params = {p.name: p for p in train_params(definition)}
    params[OBJECT_STORE_SECRET] = PARAMS_BY_NAME[OBJECT_STORE_SECRET]  # every pipeline's
    unknown = sorted(set(training) - set(params))
    if unknown:
        raise InvalidInputError(
            f"--{unknown[0].replace('_', '-')} applies to kfdist's models, not to your own "
            f"program; the program pipeline takes "
            f"{', '.join('--' + n.replace('_', '-') for n in params)}")
    if not training.get("command"):
        raise InvalidInputError("the program pipeline needs your program: pass --command "
                                "'python train.py ...'")
    values = {name: training.get(name, p.default) for name, p in params.items()}
    values["command"] = for_local_runner(values["command"])
    return values


def for_local_runner(command: Sequence[str]) -> List[str]:
    """`command` as kfp.local's subprocess runner passes it on unchanged.

    That runner replaces the text `python3` in every argument of a step, the
    step's parameters included, with its own interpreter's path
    (`kfp.local.subprocess_task_handler.replace_python_executable`). So a
    program given as this Python's path is passed as `python3`, which the
    runner turns back into this Python; any other argument holding `python3`
    would reach the program changed, and is refused.

    Raises:
      InvalidInputError: If an argument holds `python3` and is not this Python.
    """
    out = []
    for position, argument in enumerate(command):
        if "python3" not in argument:
            out.append(argument)
            continue
        found = shutil.which(argument) if position == 0 else None
        if found and os.path.realpath(found) == os.path.realpath(sys.executable):
            out.append("python3")
            continue
        raise InvalidInputError(
            f"--command argument {argument!r} holds 'python3', which kfp.local's runner replaces "
            f"with the path of this Python ({sys.executable}) in every step argument; run your "
            "program with this Python (`python3` or its path) and keep 'python3' out of the "
            "other arguments, or run it with `kfdist launch`")
    return out


def validate_program(training: Mapping[str, Any]) -> None:
    """Checks the program job the settings describe, and that its command exists here.

    Raises:
      InvalidInputError: Naming the first bad value.
    """
    from kfdist.components.launch_program.program_cluster import (
        check_backend, default_restart_policy)
    from kfdist.components.launch_program.program_job import ProgramJob, check_local_command

    job = ProgramJob(framework=training["framework"], command=tuple(training["command"]),
                     workers=training["workers"], ps=training["ps"], chief=training["chief"],
                     evaluator=training["evaluator"],
                     procs_per_worker=training["procs_per_worker"],
                     restart_policy=training["restart_policy"] or default_restart_policy(
                         training["framework"], training["mpi"], training["backend"]),
                     backoff_limit=training["backoff_limit"], mpi=training["mpi"])
    job.validate()
    if training["backend"] == "local":
        check_local_command(job.command)  # on a cluster, the command is in the image
    elif training["backend"] != "auto":
        check_backend(job, training["backend"])
