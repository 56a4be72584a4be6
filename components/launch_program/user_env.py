"""The variables a person sets on every replica: `kfdist launch --env NAME=VALUE` (pure).

As `kubectl run --env` does, each `--env` sets one variable in every replica's container
(every process under `--backend local`), beside those the operator injects. A name must be
one a shell and Kubernetes both take; the operator's and kfdist's own variables (TF_CONFIG,
RANK, KFDIST_*, ...) are theirs to set and refused here. A name given twice takes its last
value. The flag's values are checked here, once, where their text is known; a `ProgramJob`
gets its `env` only from here.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence

from kfdist.components.common.errors import require

#: A variable name a shell and Kubernetes both take.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: kfdist's own variables (its entry's, the KFDIST_* directories) start with it.
KFDIST_PREFIX = "KFDIST_"


def parse_env_flags(values: Optional[Sequence[str]]) -> Dict[str, str]:
    """`--env NAME=VALUE` values as a mapping, checked.

    Args:
      values: The flag's values in the order given (None: no `--env`).

    Raises:
      InvalidInputError: Naming the value and `--env`: no `=`, an empty or invalid name, or a
        variable the operator or kfdist sets.
    """
    env: Dict[str, str] = {}
    for value in values or ():
        name, equals, setting = value.partition("=")
        require(bool(equals), f"--env {value!r} has no '=': give NAME=VALUE, e.g. "
                "--env TF_USE_LEGACY_KERAS=1")
        _check_name(name, f"--env {value!r}")
        env[name] = setting
    return env


def _check_name(name: str, given: str) -> None:
    from kfdist.components.launch_program.operator_env import INJECTED

    require(bool(name), f"{given} has an empty name: give NAME=VALUE")
    require(ENV_NAME.match(name) is not None,
            f"{given}: {name!r} is not a variable name (letters, digits and '_', not starting "
            "with a digit)")
    require(name not in INJECTED and not name.startswith(KFDIST_PREFIX),
            f"{given}: {name} is set by the operator or kfdist in every replica; leave it out "
            "(the KFDIST_* directories come from --output and --dataset)")
