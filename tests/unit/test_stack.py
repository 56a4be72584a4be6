"""The environment the tests run in is the supported stack pinned in pyproject.toml."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import tomllib

import pytest

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"


def _exact_pins():
    with open(PYPROJECT, "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return dict(re.fullmatch(r"([\w-]+)==([\w.]+)", d).groups() for d in deps if "==" in d)


def test_the_exact_pins_are_what_is_installed():
    pins = _exact_pins()
    assert {"tensorflow", "tf-keras", "kfp", "kfp-kubernetes"} <= set(pins)
    installed = {name: importlib.metadata.version(name) for name in pins}
    assert installed == pins


def test_the_stack_is_the_supported_one():
    pins = _exact_pins()
    assert pins["tensorflow"].startswith("2.21.") and pins["tf-keras"].startswith("2.21.")
    assert pins["kfp"] == "2.17.0" and pins["kfp-kubernetes"] == "2.17.0"
    assert importlib.metadata.version("protobuf").split(".")[0] == "6"
    assert importlib.metadata.version("numpy").split(".")[0] == "2"


@pytest.mark.parametrize("name", ["tensorflow-io", "tensorflow-io-gcs-filesystem"])
def test_tensorflow_io_is_not_installed(name):
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution(name)
