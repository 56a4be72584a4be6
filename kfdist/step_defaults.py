"""The defaults of a step's parameters, read from its KFP function's signature in the component's
source, without importing the component.

A component's signature is the one definition of its defaults (the pipelines, `kfdist run` and
`kfdist launch` share it). Importing the component loads the KFP SDK, which parsing `kfdist`'s
flags and checking its settings have no need of; a lightweight component's defaults are literals
(its function's source is what runs in the step's container), so they are read here as written.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from typing import Any, Dict


@functools.lru_cache(maxsize=None)
def step_defaults(module: str, function: str) -> Dict[str, Any]:
    """The defaults of `function`'s parameters in component module `module`, by name.

    Args:
      module: The component's module, e.g. `kfdist.components.shard_dataset.component`.
      function: The step's function in it, e.g. `shard_dataset`.

    Returns:
      Each parameter that has a default, mapped to it.
    """
    origin = importlib.util.find_spec(module).origin
    with open(origin, encoding="utf-8") as source:
        tree = ast.parse(source.read(), origin)
    [step] = [node for node in tree.body
              if isinstance(node, ast.FunctionDef) and node.name == function]
    args = step.args.args
    return {arg.arg: ast.literal_eval(default)
            for arg, default in zip(args[len(args) - len(step.args.defaults):],
                                    step.args.defaults)}
