"""A command's error messages in its own words: its flags, not the parameters behind them.

The components' checks name their parameters (`pass namespace`, `slots_per_worker=2`, `set
chief=False`), as a Kubeflow Pipelines user sets them, and those messages stay as they are.
A `kfdist` command takes the same settings as flags; where it prints an error, it rewrites the
message with the mapping `flags_of` builds from that command's own flag definitions:

- `name=value` becomes `--flag value` (a switch: `--flag`, or `no --flag`; `set name=False`:
  `leave out --flag`), unless it is a `--param name=value` of `kfdist submit` or a value the
  flag does not take (`runner=DataflowRunner` is a Beam option, not `--runner`);
- `pass name` and `set name` become `pass --flag`, `set --flag`;
- a name with an underscore (`work_uri`) becomes its flag wherever it stands: it is no word;
- a one-word name (`namespace`) becomes its flag where it begins a clause and its value or
  `must` follows: `namespace 'Bad_NS' is not ...`, `epochs must be ...`.

Quoted values are never rewritten, nor a name inside a path or another flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
from typing import TYPE_CHECKING, Callable, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from kfdist.cli_parser import CommandParser

#: A value as the components quote it (`'gs://x'`), an apostrophe within a word (`job's`) not.
_QUOTED = r"""(?<!\w)'(?:[^'\\\n]|\\.)*'(?!\w)|(?<!\w)"(?:[^"\\\n]|\\.)*"(?!\w)"""
#: Not inside a word, a path, a flag or a `--param name=value`.
_STANDALONE = r"(?<![\w\-/.])(?<!--param )"


@dataclasses.dataclass(frozen=True)
class Flag:
    """A command's flag.

    Attributes:
      option: Its long option, e.g. `--namespace`.
      switch_value: For a switch, the value giving it sets (`--chief`: True, `--no-cache`:
        False); None for a flag that takes a value.
      choices: The values it takes, when there is a closed set.
    """

    option: str
    switch_value: object = None
    choices: Optional[Tuple[str, ...]] = None

    def takes(self, value: str) -> bool:
        """Whether the flag takes `value` (the text after `name=` in a message)."""
        return self.choices is None or value.strip("'\"") in self.choices

    def given(self, value: str, verb: str) -> str:
        """`verb` and the flag as given for `value` (the text after `name=` in a message)."""
        lead = f"{verb} " if verb else ""
        if self.switch_value is None:
            return f"{lead}{self.option} {value}"
        if value == str(self.switch_value):
            return f"{lead}{self.option}"
        return f"leave out {self.option}" if verb == "set" else f"{lead}no {self.option}"


def flags_of(parser: "CommandParser") -> Dict[str, Flag]:
    """The flags of `parser`'s command by the name of what they set (argparse's `dest`)."""
    flags: Dict[str, Flag] = {}
    for action in parser.options():
        options = [o for o in action.option_strings if o.startswith("--")]
        if not options or action.dest in (argparse.SUPPRESS, "help"):
            continue
        switch = action.const if action.nargs == 0 and isinstance(action.const, bool) else None
        choices = tuple(map(str, action.choices)) if action.choices else None
        flags.setdefault(action.dest, Flag(options[0], switch, choices))
    return flags


def in_flag_terms(message: str, flags: Mapping[str, Flag]) -> str:
    """`message` with every parameter name that `flags` holds spelled as its flag.

    Args:
      message: An error message of a component's check.
      flags: The command's flags, by parameter name (`flags_of`).

    Returns:
      The message as the command's user reads it.
    """
    if not flags:
        return message
    names = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True))
    joined = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True)
                      if "_" in name) or r"(?!x)x"
    pattern = re.compile(
        rf"(?P<quoted>{_QUOTED})"
        rf"|{_STANDALONE}(?:(?P<verb>set|pass) )?(?P<assigned>{names})=(?P<value>{_QUOTED}|[\w.+-]+)"
        rf"|\b(?P<verb2>pass|set) (?P<passed>{names})(?![\w\-=/])"
        rf"|{_STANDALONE}(?P<joined>{joined})(?![\w\-/=])"
        rf"|(?:^|(?<=[:;(] ))(?P<leading>{names})(?= ['\"]| must\b)")

    def spelled(match: re.Match) -> str:
        if match["quoted"]:
            return match["quoted"]
        if match["assigned"]:
            flag = flags[match["assigned"]]
            if not flag.takes(match["value"]):
                return match[0]
            return flag.given(match["value"], match["verb"] or "")
        if match["passed"]:
            return f"{match['verb2']} {flags[match['passed']].option}"
        return flags[match["joined"] or match["leading"]].option

    return pattern.sub(spelled, message)


@functools.lru_cache(maxsize=None)
def command_wording(command: str) -> Callable[[str], str]:
    """`in_flag_terms` with the flags of `kfdist <command>`: how that command words what its
    steps say in their parameters' names (a verdict's reason, a shard step's warning)."""
    from kfdist.cli import build_parser

    flags = flags_of(build_parser().subcommands()[command])
    return lambda message: in_flag_terms(message, flags)
