"""Every shell block of the README and the docs says which test runs it, and every `kfdist`
command in them is one the command line takes (its own parser reads each, so a renamed flag or
a removed choice fails here before a reader meets it)."""

from __future__ import annotations

import os

import pytest

import doc_shell_blocks
from doc_shell_blocks import ROOT, ShellBlock, all_shell_blocks, kfdist_commands
from kfdist.cli import build_parser

BLOCKS = all_shell_blocks()


def test_the_docs_have_shell_blocks_and_every_one_has_a_marker():
    assert len(BLOCKS) >= 10 and {b.doc for b in BLOCKS} >= {"README.md", "docs/guide/data.md"}
    unmarked = [str(b) for b in BLOCKS if b.kind is None]
    assert not unmarked, ("shell blocks without a `<!-- run-by: TEST_FILE -->` or "
                          f"`<!-- not-run: REASON -->` line before them: {unmarked}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "run-by"], ids=str)
def test_each_test_a_block_names_exists_and_reads_the_block(block: ShellBlock):
    assert block.runners, f"{block}: run-by names no test"
    for runner in block.runners:
        path = os.path.join(ROOT, runner)
        assert runner.startswith("tests/") and os.path.isfile(path), f"{block}: no {runner}"
        with open(path) as f:
            source = f.read()
        assert "blocks_run_by(__file__)" in source or os.path.basename(block.doc) in source, (
            f"{block}: {runner} neither collects its blocks nor reads {block.doc}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "not-run"], ids=str)
def test_a_block_not_run_says_why(block: ShellBlock):
    assert len(block.marker.split()) >= 3, f"{block}: not-run needs a reason"


def test_most_blocks_are_run():
    run = [b for b in BLOCKS if b.kind == "run-by"]
    assert len(run) >= 2 * (len(BLOCKS) - len(run)), [str(b) for b in BLOCKS if b.kind != "run-by"]


@pytest.mark.parametrize("block", [b for b in BLOCKS if kfdist_commands(b)], ids=str)
def test_every_kfdist_command_parses_with_the_command_line_parser(block: ShellBlock, capsys):
    for args in kfdist_commands(block):
        args = [a.replace("$KFP_HOST", "http://localhost:8888") for a in args]
        try:
            parsed = build_parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"{block}: `kfdist {' '.join(args)}` is refused: "
                        f"{capsys.readouterr().err.strip()}")
        assert callable(parsed.func)


def test_a_block_without_a_marker_is_found(tmp_path, monkeypatch):
    """The check above could fail: a page with an unmarked block is reported."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# x\n\n<!-- run-by: tests/a.py -->\n```bash\nkfdist "
                                        "compile\n```\n\ntext\n\n```sh\nkfdist run mnist\n```\n")
    monkeypatch.setattr(doc_shell_blocks, "ROOT", str(tmp_path))
    first, second = doc_shell_blocks.all_shell_blocks()
    assert (first.kind, first.runners, first.line) == ("run-by", ("tests/a.py",), 4)
    assert second.kind is None and kfdist_commands(second) == [["run", "mnist"]]
