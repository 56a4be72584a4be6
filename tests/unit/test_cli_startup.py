"""`kfdist` answers `--help` and refuses a bad flag or setting without loading the KFP SDK or
TensorFlow: the flags' defaults and meanings come from the pipelines' definitions
(`pipelines/definition.py`, `shipped.py`) and the steps' signatures read from their source
(`kfdist/step_defaults.py`), which are the ones the pipelines are built from."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from kfdist.step_defaults import step_defaults

#: Prints the heavy packages loaded after `main(argv)` has returned or exited.
LOADED = """
import sys
from kfdist.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted({"kfp", "tensorflow", "kubernetes"} & {m.split(".")[0] for m in sys.modules}))
"""


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["run", "--help"],
    ["launch", "--help"],
    ["run", "mnist", "--epochs", "abc"],
    ["run", "mnist", "--accuracy-threshold", "2"],
    ["run", "tabular", "--data", "no-such-table.csv"],
], ids=" ".join)
def test_help_and_refusals_load_neither_kfp_nor_tensorflow(argv, tmp_path):
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout[-2000:] + done.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize("module,function", [
    ("kfdist.components.shard_dataset.component", "shard_dataset"),
    ("kfdist.components.launch_program.component", "train_program"),
    ("kfdist.components.train_distributed.component", "train_distributed"),
    ("kfdist.components.evaluate_model.component", "evaluate_model"),
])
def test_the_defaults_read_from_a_steps_source_are_its_signatures(module, function):
    import importlib

    step = getattr(importlib.import_module(module), function)
    signature = inspect.signature(step.python_func).parameters
    assert step_defaults(module, function) == {
        name: p.default for name, p in signature.items() if p.default is not p.empty}
