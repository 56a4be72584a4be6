"""A command line that helps: every flag explains itself, and a usage error is one line that
says what would be valid (the nearest option, the valid choices) and whose `--help` to read."""

from __future__ import annotations

import pytest

from kfdist.cli import build_parser
from kfdist.sample_data import SAMPLE_DESCRIPTIONS, SAMPLES


def _parsers(parser=None, path=("kfdist",)):
    """(command path, parser) of the command and of every subcommand, at any depth."""
    parser = parser or build_parser()
    yield " ".join(path), parser
    for name, sub in parser.subcommands().items():
        yield from _parsers(sub, path + (name,))


def _usage_error(argv, capsys) -> str:
    """The stderr of parsing `argv`, which must exit 2 (nothing runs: only the parser)."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_every_subcommand_is_walked():
    assert {path for path, _ in _parsers()} >= {
        "kfdist", "kfdist sample-data", "kfdist run", "kfdist train", "kfdist compile",
        "kfdist render", "kfdist render launch", "kfdist submit", "kfdist launch"}


def test_every_argument_of_every_subcommand_has_help():
    missing = [f"{path} {action.option_strings or action.dest}"
               for path, parser in _parsers() for action in parser.options()
               if not (action.help or "").strip()]
    assert missing == []


def test_no_parser_takes_an_abbreviation():
    assert [path for path, parser in _parsers() if parser.allow_abbrev] == []


@pytest.mark.parametrize("argv, line", [
    (["run", "mnist", "--lable-column", "species"],
     "kfdist: invalid input: unknown option --lable-column; did you mean --label-column? "
     "(see `kfdist run --help`)"),
    (["run", "mnist", "--epoch", "3"],
     "kfdist: invalid input: unknown option --epoch; did you mean --epochs? "
     "(see `kfdist run --help`)"),
    (["train", "--ouput", "out"],
     "kfdist: invalid input: unknown option --ouput; did you mean --output? "
     "(see `kfdist train --help`)"),
    (["launch", "--frame", "pytorch", "--output", "out", "--", "python", "t.py"],
     "kfdist: invalid input: unknown option --frame; did you mean --framework? "
     "(see `kfdist launch --help`)"),
    (["render", "launch", "--output", "out", "--workrs", "2", "--", "python", "t.py"],
     "kfdist: invalid input: unknown option --workrs; did you mean --workers? "
     "(see `kfdist render launch --help`)"),
])
def test_a_mistyped_or_abbreviated_option_names_the_nearest_and_the_subcommands_help(
        argv, line, capsys):
    assert _usage_error(argv, capsys).splitlines() == [line]


@pytest.mark.parametrize("argv, valid", [
    (["run", "mnist", "--split", "random"], "'auto', 'predefined', 'hash'"),
    (["sample-data", "penguins", "--out", "x"], "'images', 'mnist', 'tabular'"),
    (["launch", "--framework", "jax", "--output", "out"], "'tensorflow', 'pytorch'"),
])
def test_an_invalid_choice_is_one_line_naming_the_valid_ones(argv, valid, capsys):
    lines = _usage_error(argv, capsys).splitlines()
    assert len(lines) == 1 and lines[0].startswith("kfdist: invalid input: "), lines
    assert valid in lines[0]


def test_sample_data_help_lists_every_sample_with_what_it_is(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sample-data", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert set(SAMPLE_DESCRIPTIONS) == set(SAMPLES)
    for name, description in SAMPLE_DESCRIPTIONS.items():
        assert f"{name} ({description})" in shown
