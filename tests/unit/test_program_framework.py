"""`kfdist launch` without `--framework`: the framework is read from the program's imports (the
program is parsed, never run), and the choice is said with its reason."""

from __future__ import annotations

import pytest

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.launch_program.program_framework import choose_framework
from kfdist.run_program import program_default

#: Never imported for real: the program is only parsed.
TORCH_PROGRAM = "import os\nif False:\n    import torch.distributed as dist\nprint(os.getpid())\n"


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _choose(command, program_dir=None):
    said = []
    framework = choose_framework(command, program_dir, "tensorflow", said.append)
    assert len(said) == 1
    return framework, said[0]


@pytest.mark.parametrize("files, command, framework, reason", [
    ({"train.py": TORCH_PROGRAM}, ["python", "train.py"], "pytorch", "train.py imports torch"),
    ({"train.py": TORCH_PROGRAM}, ["python3", "-u", "-X", "dev", "train.py", "--epochs", "2"],
     "pytorch", "train.py imports torch"),
    ({"train.py": TORCH_PROGRAM}, ["torchrun", "--nproc-per-node", "2", "train.py"], "pytorch",
     "train.py imports torch"),
    ({"app/__main__.py": "from tensorflow import keras\n"}, ["python", "app"], "tensorflow",
     "__main__.py imports tensorflow"),
    ({"pkg/__init__.py": "", "pkg/train.py": "from pkg import model\n",
      "pkg/model.py": "import tensorflow as tf\n"}, ["python", "-m", "pkg.train"], "tensorflow",
     "pkg/model.py imports tensorflow"),
    ({"pkg/__init__.py": "", "pkg/train.py": "from .net import build\n",
      "pkg/net.py": "import horovod.torch as hvd\n"}, ["python", "-m", "pkg.train"], "pytorch",
     "pkg/net.py imports horovod.torch"),
    ({"train.py": "import helper\n", "helper.py": "import keras\n"}, ["./train.py"], "tensorflow",
     "helper.py imports keras"),
    ({}, ["python", "-c", "import torch; print(torch.__version__)"], "pytorch",
     "the -c program imports torch"),
])
def test_the_framework_is_the_one_the_program_imports(tmp_path, monkeypatch, files, command,
                                                       framework, reason):
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    assert _choose(command) == (framework, f"framework: {framework} ({reason}; --framework "
                                           "chooses)")


def test_the_entry_file_is_looked_for_in_the_program_directory(tmp_path, monkeypatch):
    _write(tmp_path / "prog", {"train.py": TORCH_PROGRAM})
    monkeypatch.chdir(tmp_path)  # where `kfdist launch --program-dir prog` runs
    assert _choose(["python", "train.py"], str(tmp_path / "prog"))[0] == "pytorch"
    assert _choose(["python", "train.py"])[0] == "tensorflow"  # not here: the default


@pytest.mark.parametrize("files, command, why", [
    ({"train.py": "import numpy\n"}, ["python", "train.py"],
     "train.py imports neither tensorflow nor torch"),
    ({"train.py": "import torch\ndef broken(:\n"}, ["python", "train.py"],
     "train.py imports neither tensorflow nor torch"),
    ({}, ["bash", "-c", "python train.py"], "the command names no Python file found here"),
    ({}, ["python", "missing.py"], "the command names no Python file found here"),
])
def test_a_program_that_says_nothing_gets_the_default_and_is_told_so(tmp_path, monkeypatch,
                                                                      files, command, why):
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    assert _choose(command) == ("tensorflow", f"framework: tensorflow (the default: {why}; "
                                              "--framework chooses)")


def test_a_program_that_imports_both_is_refused_naming_both(tmp_path, monkeypatch):
    _write(tmp_path, {"train.py": "import tensorflow as tf\nimport torch\n"})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError) as refused:
        _choose(["python", "train.py"])
    assert str(refused.value) == (
        "cannot tell the program's framework: train.py imports tensorflow and train.py imports "
        "torch; pass --framework tensorflow or --framework pytorch")


def test_launch_and_run_program_share_the_program_steps_default():
    from kfdist.cli import build_parser

    parsers = build_parser().subcommands()
    helps = {name: next(action.help for action in parsers[name].options()
                        if "--framework" in action.option_strings) for name in ("launch", "run")}
    assert program_default("framework") == "tensorflow"
    assert helps["launch"].endswith(f"else {program_default('framework')}")
    assert helps["run"].endswith(f"(default: {program_default('framework')})")
