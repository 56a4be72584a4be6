"""The README's and the docs' shell blocks that run a pipeline or a program, run as written
(`<!-- run-by: tests/e2e/test_doc_pipeline_runs.py -->`), each in a fresh directory holding the
repository's `examples/`, then checked for what the text around them promises: a blessed,
exported model and the evaluation report where the README says it is, or a job that succeeded.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from doc_shell_blocks import ROOT, ShellBlock, blocks_run_by, kfdist_commands
from kfdist.cli import build_parser

pytestmark = pytest.mark.slow
BLOCKS = blocks_run_by(__file__)


def test_this_module_has_blocks_to_run():
    assert {b.doc for b in BLOCKS} >= {"README.md", "docs/guide/data.md", "docs/guide/program.md"}


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_the_block_runs_as_written(block: ShellBlock, tmp_path):
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"{block}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    for args in kfdist_commands(block):
        parsed = build_parser().parse_args(args)  # the output directories, defaults included
        if parsed.command == "run":
            _check_run(tmp_path / parsed.output, own_program=parsed.pipeline == "program")
        elif parsed.command == "launch":
            assert "job succeeded" in done.stderr, done.stderr[-3000:]
        elif parsed.command == "sample-data":
            assert os.listdir(tmp_path / parsed.out)


def _check_run(output, own_program: bool) -> None:
    """The run blessed and exported its model; the summary, logs, report and (kfdist's own
    training) the TensorBoard curves are where the README's table puts them."""
    with open(output / "summary.json") as f:
        summary = json.load(f)
    assert summary["blessed"] is True and summary["export"]["exported"] is True, summary
    assert os.path.isdir(summary["export"]["path"])
    assert glob.glob(str(output / "logs" / "*.log"))
    assert (output / "report.html").is_file() and summary["report"] == str(output / "report.html")
    curves = glob.glob(str(output / "pipeline_root" / "*" / "train-*" / "model" / "tensorboard"))
    assert own_program or curves
