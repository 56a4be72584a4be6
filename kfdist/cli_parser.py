"""The argument parser of the `kfdist` command: a usage error is one line, as any bad input.

argparse makes every subcommand's parser of its parent's class, so each of them:
- refuses abbreviations (`--epoch` is not taken for `--epochs`);
- names a mistyped option's nearest one (`--lable-column` → `--label-column`) and its own
  `--help` (`kfdist run --help`, not the command's);
- reports an invalid choice in one line naming the valid ones, without the usage.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Dict, List, NoReturn, Optional, Sequence

#: How argparse's message on a missing required argument begins.
_MISSING = "the following arguments are required"
#: How alike a mistyped option and a known one must be for the known one to be suggested.
_SUGGESTION_CUTOFF = 0.6


class CommandParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose usage errors read as kfdist's other bad inputs."""

    def __init__(self, *args, **kwargs):
        """As `argparse.ArgumentParser`, but abbreviations of long options are refused."""
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.subcommand_actions: List[argparse.Action] = []
        self.given: List[str] = []

    def add_subparsers(self, **kwargs) -> argparse.Action:
        """As `argparse.ArgumentParser.add_subparsers`, remembering the action it returns."""
        action = super().add_subparsers(**kwargs)
        self.subcommand_actions.append(action)
        return action

    def subcommands(self) -> Dict[str, "CommandParser"]:
        """The parsers of this parser's subcommands, by name (`{}` when it has none)."""
        return {name: sub for action in self.subcommand_actions
                for name, sub in action.choices.items()}

    def chosen(self, parsed: argparse.Namespace) -> "CommandParser":
        """The innermost subcommand's parser `parsed` came from (`kfdist render launch`'s for
        `render launch ...`), else this one."""
        for action in self.subcommand_actions:
            name = getattr(parsed, action.dest, None)
            if name in action.choices:
                return action.choices[name].chosen(parsed)
        return self

    def options(self) -> List[argparse.Action]:
        """This parser's arguments (`--help`'s entries, suppressed ones too)."""
        return list(self._actions)

    def error(self, message: str) -> NoReturn:
        """Prints `kfdist: invalid input: MESSAGE (see `PROG --help`)` and exits 2; a missing
        argument after a mistyped option (`--ouput x`) is reported as that option."""
        mistyped = self.leading_unknown_option() if message.startswith(_MISSING) else None
        if mistyped:
            self.refuse_unknown([mistyped])
        self.exit(2, f"kfdist: invalid input: {message} (see `{self.prog} --help`)\n")

    def parse_known_args(self, args: Optional[Sequence[str]] = None,
                         namespace: Optional[argparse.Namespace] = None):
        """As `argparse.ArgumentParser.parse_known_args`, remembering the arguments."""
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def leading_unknown_option(self) -> Optional[str]:
        """The first option given that this parser does not take, before any positional
        argument (after one, an option may be a program's own: `launch -- python t.py -v`)."""
        takes_value = {option: action.nargs != 0 for action in self.options()
                       for option in action.option_strings}
        given = iter(self.given)
        for arg in given:
            if arg == "--" or not arg.startswith(tuple(self.prefix_chars)):
                return None
            flag = arg.split("=", 1)[0]
            if flag not in takes_value:
                return flag
            if takes_value[flag] and "=" not in arg:
                next(given, None)
        return None

    def parse_args(self, args: Optional[Sequence[str]] = None,
                   namespace: Optional[argparse.Namespace] = None) -> argparse.Namespace:
        """Parses `args`; arguments nobody takes are refused by the subcommand given."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.chosen(parsed).refuse_unknown(extras)
        return parsed

    def refuse_unknown(self, extras: Sequence[str]) -> NoReturn:
        """Exits 2 naming the first unknown option in `extras` and the nearest known one."""
        options = [arg for arg in extras if arg.startswith(tuple(self.prefix_chars)) and arg != "-"]
        if not options:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        flag = options[0].split("=", 1)[0]
        known = [option for action in self.options() if action.help is not argparse.SUPPRESS
                 for option in action.option_strings]
        nearest = difflib.get_close_matches(flag, known, n=1, cutoff=_SUGGESTION_CUTOFF)
        self.error(f"unknown option {flag}" + (f"; did you mean {nearest[0]}?" if nearest else ""))
