"""A replica of a program kfdist starts in its own image: fetch, install, set up, run.

    python -m kfdist.components.launch_program.pod_entry [--program URI] [--tf-layout COUNTS]
        -- COMMAND [ARGS...]

Runs in every replica, in kfdist's runtime image on a cluster and as a process here alike. It
copies the program from `URI` (a remote URI or a directory on the PVC) into a scratch directory of
its own, installs the shipped requirements there (`pip install --target`, put first on
PYTHONPATH, so the image's own packages are left as they are), makes the KFDIST_* directories
that are local paths, and replaces itself with COMMAND, run in the program's directory. A
command that cannot start ends it with exit 2 and one line naming it.

`--tf-layout '{"worker": 2, "ps": 1}'` is for a TensorFlow program in a TrainJob on kfdist's
`kfdist-tensorflow` runtime, where Trainer injects no TF_CONFIG: the replica derives the Training
Operator's TF_CONFIG from its pod's JobSet identity (`jobset_cluster`) before the command starts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

from kfdist.components.common import own_env, storage
from kfdist.components.launch_program import operator_env
from kfdist.components.launch_program.program_files import REQUIREMENTS_FILE

#: The module every replica runs it as.
MODULE = "kfdist.components.launch_program.pod_entry"
#: Exit status of a replica whose program cannot start (a bad command, not a training failure).
CANNOT_START = 2
#: Where to make the replica's scratch directory (`kfdist launch --backend local` sets it to a
#: directory it removes after the job; taken out of the environment before the program starts).
SCRATCH_ENV = "KFDIST_PROGRAM_SCRATCH"


def entry_command(python: str, options: List[str], command: List[str]) -> List[str]:
    """`python -m <this module> OPTIONS -- COMMAND`, as a replica's command."""
    return [python, "-m", MODULE, *options, "--", *command]


def _say(message: str) -> None:
    print(f"kfdist-program: {message}", flush=True)


def install_requirements(program_dir: str, scratch: str) -> Optional[str]:
    """Installs the program's pinned requirements under `scratch`; returns that directory."""
    requirements = os.path.join(program_dir, REQUIREMENTS_FILE)
    if not os.path.isfile(requirements):
        return None
    target = os.path.join(scratch, "packages")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-input",
                           "--disable-pip-version-check", "--target", target, "-r", requirements],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        _say(f"pip could not install the requirements:\n{done.stdout.strip()}")
        raise SystemExit(CANNOT_START)
    _say(f"installed the requirements in {time.monotonic() - started:.1f} s")
    return target


def _install_tf_config(env: dict, counts: dict) -> None:
    """TF_CONFIG from the pod's JobSet identity (none for a lone replica, as the operator)."""
    from kfdist.components.train_distributed.job import jobset_cluster, tf_config

    if env.get(tf_config.TF_CONFIG_ENV):
        return
    identity = jobset_cluster.pod_identity(env)
    if identity is None:
        _say("--tf-layout needs the JobSet identity the kfdist-tensorflow runtime gives its pods")
        raise SystemExit(CANNOT_START)
    value = jobset_cluster.jobset_tf_config(identity, counts, env)
    if value is not None:
        env[tf_config.TF_CONFIG_ENV] = tf_config.to_env_value(value)


def main(argv: Optional[List[str]] = None) -> int:
    """Fetches the program, installs its requirements and execs the command; returns only on
    an error (its exit status)."""
    parser = argparse.ArgumentParser(prog="kfdist-program")
    parser.add_argument("--program", help="the shipped program's URI")
    parser.add_argument("--tf-layout", help="replicas by TensorFlow type, as JSON")
    parser.add_argument("--stage", type=float, metavar="SYNC_SECONDS",
                        help="give the program local KFDIST_* directories for its remote ones, "
                             "the leader's checkpoints uploaded every SYNC_SECONDS (`staging`)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _say("no command after --")
        return CANNOT_START
    env = own_env.user_environ()  # none of kfdist's own variables reach the program
    scratch = env.pop(SCRATCH_ENV, None)
    if args.tf_layout:
        _install_tf_config(env, json.loads(args.tf_layout))
    if args.program or args.stage is not None:
        scratch = tempfile.mkdtemp(prefix="kfdist-program-", dir=scratch)
    if args.program:
        program_dir = storage.copy_dir_from(args.program, os.path.join(scratch, "program"))
        packages = install_requirements(program_dir, scratch)
        paths = [p for p in (packages, program_dir, env.get("PYTHONPATH")) if p]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        os.chdir(program_dir)
    for name in (operator_env.MODEL_DIR_ENV, operator_env.CHECKPOINT_DIR_ENV):
        location = env.get(name)
        if location and not storage.is_remote(location):
            os.makedirs(location, exist_ok=True)
    executable = command[0] if os.sep in command[0] else shutil.which(command[0], path=env.get("PATH"))
    if executable is None or not os.access(executable, os.X_OK):
        _say(f"command {command[0]!r} cannot start: not an executable file, nor on PATH")
        return CANNOT_START
    if args.stage is not None:
        from kfdist.components.launch_program import staging

        return staging.run_staged([executable, *command[1:]], env, scratch, args.stage)
    os.execve(executable, command, env)
    return CANNOT_START  # not reached


if __name__ == "__main__":
    sys.exit(main())
