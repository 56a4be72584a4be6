"""The README's and the docs' shell blocks that compile, submit or print a job, run as written
(`<!-- run-by: tests/unit/test_doc_quick_commands.py -->`), each in a fresh directory.

What they need from outside is played here: `$KFP_HOST` (or the `--host` a block names) is the
fake Kubeflow Pipelines API over real HTTP, which records what `kfdist submit` sent, and a
directory that holds the compiled pipelines (`kfdist compile --out-dir pipelines`) unless the
block compiles them itself. Two changes to the commands, both said here: `kfdist submit` polls
every 0.05 s instead of every 10, and `kfdist launch` with a cluster backend gets `--dry-run`,
so it prints the job it would create instead of needing a cluster (the tests of
tests/kubernetes and tests/containers create such jobs).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from doc_shell_blocks import ROOT, ShellBlock, blocks_run_by, kfdist_commands
from fakes.kfp_server import API

BLOCKS = blocks_run_by(__file__)
#: The kind of job each `kfdist launch --backend` creates.
JOB_KIND = {"tfjob": "TFJob", "pytorchjob": "PyTorchJob", "mpijob": "MPIJob",
            "trainjob": "TrainJob"}


def _prepared(block: ShellBlock, kfp_url: str) -> str:
    """The block's code with the fake KFP host, a quick poll and `--dry-run` for a cluster."""
    code = re.sub(r"--host\s+\S+", f"--host {kfp_url}", block.code)
    code = code.replace("kfdist submit ", "kfdist submit --poll-interval 0.05 ")
    return re.sub(r"(kfdist launch (?:(?!\s--\s).)*--backend (?:" + "|".join(JOB_KIND) +
                  r")\b(?:(?!\s--\s).)*?)\s--\s", r"\1 --dry-run -- ", code, flags=re.S)


def _run(block: ShellBlock, cwd, kfp_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KFP_HOST": kfp_url,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", _prepared(block, kfp_url)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_this_module_has_blocks_to_run():
    assert {b.doc for b in BLOCKS} >= {"README.md", "docs/ci-submit.md", "docs/guide/cluster.md"}


def test_a_cluster_launch_is_given_dry_run_before_the_program():
    block = ShellBlock("x.md", 1, "kfdist launch --backend tfjob --workers 2 \\\n  -- python t.py"
                                  " --backend tfjob\n", "run-by", "")
    assert _prepared(block, "http://h").endswith("--workers 2 \\\n  --dry-run -- python t.py "
                                                 "--backend tfjob\n")


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_the_block_runs_as_written(block: ShellBlock, kfp_server, tmp_path):
    if not any(args[:1] == ["compile"] for args in kfdist_commands(block)):
        shutil.copytree(os.path.join(ROOT, "pipelines"), tmp_path / "pipelines",
                        ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    done = _run(block, tmp_path, kfp_server.url)
    assert done.returncode == 0, f"{block}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    for args in kfdist_commands(block):
        if args[0] == "compile":
            out_dir = tmp_path / args[args.index("--out-dir") + 1]
            assert {p.name for p in out_dir.glob("*.yaml")} >= {"mnist.yaml", "tabular.yaml"}
            if "--registry" in args:  # every image the YAML names is in that registry
                registry = args[args.index("--registry") + 1]
                images = re.findall(r"(?m)^ +image: (\S+)", (out_dir / "mnist.yaml").read_text())
                assert images and all(i.strip("'\"").startswith(registry + "/") for i in images)
        elif args[0] == "submit":
            _check_submitted(args, kfp_server)
            assert "--wait" not in args or "RUNNING -> SUCCEEDED" in done.stderr, done.stderr
        elif args[0] == "launch":
            _check_printed_job(args, done.stdout)


def _check_submitted(args, kfp_server) -> None:
    """Every `--param` of the command reached the KFP API in the run it created."""
    runs = kfp_server.requests_to("POST", f"{API}/runs")
    sent = {}
    for run in runs:
        sent.update(run.body["runtime_config"]["parameters"])
    for i, arg in enumerate(args):
        if arg == "--param":
            name, value = args[i + 1].split("=", 1)
            assert name in sent, (name, sorted(sent))
            assert yaml.safe_load(value) == sent[name], (name, value, sent[name])


def _check_printed_job(args, stdout: str) -> None:
    """The job printed is of the backend's kind and runs the block's image and program."""
    backend = args[args.index("--backend") + 1]
    [job] = [d for d in yaml.safe_load_all(stdout) if d]
    assert job["kind"] == JOB_KIND[backend], job["kind"]
    text = yaml.safe_dump(job)
    if "--image" in args:
        assert args[args.index("--image") + 1] in text
    if "--namespace" in args:
        assert job["metadata"]["namespace"] == args[args.index("--namespace") + 1]
    program = args[args.index("--") + 1:]
    assert shlex.join(program) in text or all(word in text for word in program), program
