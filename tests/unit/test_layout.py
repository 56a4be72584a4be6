"""The code is grouped by where it runs, in small modules and functions.

`components/train_distributed/`: `job/` is the contract shared by the step and
the replicas (no TensorFlow, no Kubernetes client), `replica/` is the only
TensorFlow importer, `kubernetes/client/` the only user of the Kubernetes
client, `kubernetes/build/` pure renderers.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
from typing import Iterator, List, Tuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TRAIN = REPO / "components" / "train_distributed"
#: Shipped code and the test doubles: small modules, small functions.
CHECKED = ("components", "kfdist", "pipelines", "benchmarks", "tests/fakes")
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60  # without the docstring


def _modules(*roots: str) -> Iterator[pathlib.Path]:
    for root in roots:
        yield from sorted((REPO / root).rglob("*.py"))


def _imports(path: pathlib.Path) -> List[str]:
    """Every module `path` imports, at any depth (function-level imports too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _top(name: str) -> str:
    return name.split(".")[0]


def test_no_module_is_over_300_lines():
    long = {str(p.relative_to(REPO)): p.read_text().count("\n") for p in _modules(*CHECKED)}
    assert {p: n for p, n in long.items() if n > MAX_MODULE_LINES} == {}


def _function_lengths(path: pathlib.Path) -> Iterator[Tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            docstring = (body[0].end_lineno - body[0].lineno + 1
                         if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                         and isinstance(body[0].value.value, str) else 0)
            yield node.name, node.end_lineno - node.lineno + 1 - docstring


def test_no_function_is_over_60_lines():
    long = {f"{p.relative_to(REPO)}:{name}": n for p in _modules(*CHECKED)
            for name, n in _function_lengths(p) if n > MAX_FUNCTION_LINES}
    assert long == {}


@pytest.mark.parametrize("package, forbidden", [
    ("job", {"tensorflow", "tf_keras", "horovod", "kubernetes", "numpy"}),
    ("local", {"tensorflow", "tf_keras", "horovod", "kubernetes"}),
    ("kubernetes", {"tensorflow", "tf_keras", "horovod"}),
])
def test_where_tensorflow_and_the_kubernetes_client_are_imported(package, forbidden):
    found = {str(p.relative_to(TRAIN)): sorted({_top(n) for n in _imports(p)} & forbidden)
             for p in _modules(f"components/train_distributed/{package}")}
    assert {p: names for p, names in found.items() if names} == {}


def test_only_the_client_module_talks_to_the_kubernetes_api():
    users = sorted(str(p.relative_to(REPO)) for p in _modules("components", "kfdist", "pipelines")
                   if "kubernetes" in {_top(n) for n in _imports(p)})
    assert users == ["components/train_distributed/kubernetes/client/kube_api.py"]


def test_shipped_code_and_benchmarks_do_not_import_the_tests():
    """The benchmarks reach the test API server only as a program, through a kubeconfig."""
    test_packages = {p.name for p in (REPO / "tests").iterdir() if (p / "__init__.py").exists()}
    test_packages |= {"tests", "conftest"}
    found = {str(p.relative_to(REPO)): sorted({_top(n) for n in _imports(p)} & test_packages)
             for p in _modules("components", "kfdist", "pipelines", "benchmarks")}
    assert {p: names for p, names in found.items() if names} == {}
    assert not [p for p in _modules("benchmarks") if "sys.path" in p.read_text()]


def test_the_step_side_does_not_load_tensorflow():
    """The KFP step validates, launches and reports without TensorFlow (the replicas train)."""
    code = ("import sys; import kfdist.components.train_distributed.runtime, "
            "kfdist.components.train_distributed.kubernetes.backend, "
            "kfdist.components.train_distributed.local.local_backend; "
            "print(sorted(m for m in ('tensorflow', 'tf_keras', 'horovod') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_package_says_where_its_code_runs():
    for init in TRAIN.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(REPO)} has no docstring"
