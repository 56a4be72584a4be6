"""The product uses third-party libraries through their public API only.

A private module (`tensorflow.python...`, `tf_keras.src...`) or a private
attribute of another package's object can be renamed or moved by any release:
the code would then crash, or, worse, silently lose what it was for.
"""

from __future__ import annotations

import ast
import os
from typing import Iterator, List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRODUCT_DIRS = ("components", "kfdist", "pipelines")
OWN_TOP_LEVEL = {"kfdist", "components", "pipelines"}
#: Names spelled with a leading underscore that are public API nonetheless.
PUBLIC_UNDERSCORE = {"os._exit", "sys._getframe"}


def _python_files() -> Iterator[str]:
    for top in PRODUCT_DIRS:
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            yield from (os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))


def _private_module(module: str) -> bool:
    parts = module.split(".")
    if parts[0] in OWN_TOP_LEVEL:
        return False
    if parts[0] == "tensorflow" and "python" in parts[1:]:
        return True
    if parts[0] in ("keras", "tf_keras") and "src" in parts[1:]:
        return True
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def private_uses(source: str, filename: str = "<source>") -> List[str]:
    """Every import of a private third-party module and every `obj._name` outside `self`/`cls`."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _private_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [a.name for a in node.names]
            if _private_module(node.module) or (
                    node.module.split(".")[0] not in OWN_TOP_LEVEL
                    and any(n.startswith("_") and not n.startswith("__") for n in names)):
                found.append(f"{node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            owner = ast.unparse(node.value)
            if owner not in ("self", "cls") and f"{owner}.{node.attr}" not in PUBLIC_UNDERSCORE:
                found.append(f"{node.lineno}: {owner}.{node.attr}")
    return found


@pytest.mark.parametrize("snippet", [
    "from tensorflow.python.autograph.core import config",
    "import tf_keras.src.engine.training",
    "from keras.src import backend",
    "from apache_beam.runners.direct import _private",
    "import tensorflow as tf\ntf.keras.Model._train_counter",
    "def f(model):\n    return model._steps_per_execution",
])
def test_the_checker_sees_private_uses(snippet):
    assert private_uses(snippet)


@pytest.mark.parametrize("snippet", [
    "import tensorflow as tf\ntf.autograph.experimental.do_not_convert",
    "from kfp.pipeline_spec import pipeline_spec_pb2",
    "class A:\n    def f(self):\n        return self._x",
    "import os\nos._exit(3)",
])
def test_the_checker_passes_public_uses(snippet):
    assert not private_uses(snippet)


def test_the_product_uses_no_private_third_party_api():
    found = []
    for path in _python_files():
        with open(path, encoding="utf-8") as f:
            found += [f"{os.path.relpath(path, ROOT)}:{use}" for use in private_uses(f.read(), path)]
    assert not found, "private third-party API in the product:\n" + "\n".join(found)
