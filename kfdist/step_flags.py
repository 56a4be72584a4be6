"""Command-line flags of the training step's parameters, generated from `job.step_params`.

`kfdist train`, `kfdist render` and `kfdist run` add these flags; their names,
types, defaults, choices and help come from the one definition.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, Optional, Sequence

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.job.step_params import PARAMS_BY_NAME, TRAIN_STEP_PARAMS, Param


def _key_values(flag: str, value: str) -> Dict[str, str]:
    pairs = {}
    for item in filter(None, value.split(",")):
        key, sep, val = item.partition("=")
        require(bool(sep) and bool(key), f"{flag} {item!r} must look like KEY=VALUE")
        pairs[key] = val
    return pairs


def add_step_flags(parser: argparse.ArgumentParser,
                   include: Callable[[Param], bool] = lambda p: True,
                   defaults_from: str = "",
                   title: str = "training step (the train_distributed component's parameters)",
                   choices: Optional[Dict[str, Sequence[str]]] = None) -> None:
    """Adds a flag for every training-step parameter `include` accepts.

    Booleans are switches (`--chief`); a string map takes `KEY=VALUE[,KEY=VALUE]`
    and may be repeated; the rest take one value of the parameter's type.

    Args:
      parser: The command's parser.
      include: Which parameters get a flag.
      defaults_from: Where the defaults of flags left out come from, when not
        from the step (e.g. "the pipeline's"): such flags are then left out of
        the parsed arguments (and of `step_values`).
      title: The flags' group heading in `--help`.
      choices: Per parameter, the values its flag takes instead of the step's choices (a
        command whose other steps take more, checked later).
    """
    group = parser.add_argument_group(title)
    for param in TRAIN_STEP_PARAMS:
        if not include(param):
            continue
        shown = param.default if param.default not in ("", 0, {}) else "unset"
        if defaults_from:
            shown = f"{defaults_from}, else {shown}"
        extra: Dict[str, Any] = {"dest": param.name, "help": f"{param.help} (default: {shown})"}
        if defaults_from:
            extra["default"] = argparse.SUPPRESS
        if isinstance(param.default, bool):
            group.add_argument(param.cli_flag, action="store_true", **extra)
        elif isinstance(param.default, dict):
            group.add_argument(param.cli_flag, action="append", metavar="KEY=VALUE",
                               **{"default": [], **extra})
        else:
            group.add_argument(param.cli_flag, type=type(param.default),
                               choices=(choices or {}).get(param.name, param.choices),
                               **{"default": param.default, **extra})


def step_values(args: argparse.Namespace) -> Dict[str, Any]:
    """The training-step parameter values in parsed `args` (string maps merged)."""
    values = {}
    for param in TRAIN_STEP_PARAMS:
        if not hasattr(args, param.name):
            continue
        value = getattr(args, param.name)
        if isinstance(param.default, dict):
            value = {k: v for text in value for k, v in _key_values(param.cli_flag, text).items()}
        values[param.name] = value
    return values


def spell(name: str, value: Any) -> str:
    """The flag of training-step parameter `name` given `value`, as a user types it
    (`--gpus-per-worker 2`; a switch alone: `--chief`)."""
    param = PARAMS_BY_NAME[name]
    return param.cli_flag if isinstance(param.default, bool) else f"{param.cli_flag} {value}"
