"""The command-line reference page, written from `kfdist`'s own argument parser.

Every command, subcommand and flag is read from `kfdist.cli.build_parser()`, the one definition
the command itself parses with, so the page lists what `kfdist COMMAND --help` lists.
"""

from __future__ import annotations

import argparse
from typing import List

from markdown_tables import cell, table

#: What the page says above the generated sections.
INTRO = ("Generated from `kfdist`'s argument parser when the site is built: every command and "
         "flag, with its help text and default, exactly as `kfdist COMMAND --help` prints them.")


def _metavar(action: argparse.Action) -> str:
    """What `--help` shows after a flag: its metavar, `{a,b}` for choices, else its dest."""
    if action.metavar:
        return action.metavar
    if action.choices:
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest.upper()


def _flag_names(action: argparse.Action) -> str:
    """`--epochs EPOCHS` for an option, `PIPELINE` for a positional argument."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    value = "" if action.nargs == 0 else f" {_metavar(action)}"
    return ", ".join(f"`{option}{value}`" for option in action.option_strings)


def _help_text(action: argparse.Action, prog: str) -> str:
    """The action's help with `%(default)s` and friends filled in, as argparse fills them,
    then its choices."""
    text = ""
    if action.help:
        params = {**vars(action), "prog": prog}
        if action.choices:
            params["choices"] = ", ".join(str(choice) for choice in action.choices)
        text = action.help % params
    if action.choices:
        choices = ", ".join(f"`{choice}`" if choice != "" else '`""` (empty)'
                            for choice in action.choices)
        text = f"{text} (one of {choices})" if text else f"one of {choices}"
    return text


def _default(action: argparse.Action) -> str:
    """The default a flag takes, or empty when it has none worth showing."""
    if action.required or not action.option_strings or action.nargs == 0:
        return ""
    if action.default in (None, "", (), [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _subcommand_helps(parser) -> dict:
    """The `help=` each subcommand was added with, by name (argparse keeps it only on the
    pseudo-actions its subparsers action lists in `--help`)."""
    return {choice.dest: choice.help for action in parser.subcommand_actions
            for choice in action._choices_actions}


def _command_section(parser, path: List[str]) -> List[str]:
    """The Markdown of one (sub)command and, after it, of each of its subcommands."""
    lines = [f"## `{' '.join(path)}`", ""]
    if parser.description:
        lines += [parser.description.strip(), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [(_flag_names(action), cell(_help_text(action, parser.prog)), _default(action))
            for action in parser.options()
            if action.help is not argparse.SUPPRESS and action.dest != "help"
            and action not in parser.subcommand_actions]
    if rows:
        lines += table(("argument", "meaning", "default"), rows) + [""]
    for name, sub in parser.subcommands().items():
        lines += _command_section(sub, path + [name])
    return lines


def cli_reference() -> str:
    """The Markdown page of every `kfdist` command and flag."""
    from kfdist.cli import build_parser

    parser = build_parser()
    commands = parser.subcommands()
    lines = ["# Every command and flag", "", INTRO, ""]
    helps = _subcommand_helps(parser)
    lines += table(("command", "what it does"),
                   [(f"[`kfdist {name}`](#kfdist-{name})", cell(helps.get(name) or ""))
                    for name in commands]) + [""]
    for name, sub in commands.items():
        lines += _command_section(sub, ["kfdist", name])
    return "\n".join(lines) + "\n"
