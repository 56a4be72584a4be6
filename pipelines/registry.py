"""The pipelines kfdist ships, by name, and their compiled YAML files."""

import os
from typing import Callable, Dict

from kfdist.components.common.errors import InvalidInputError

PIPELINES_DIR = os.path.dirname(os.path.abspath(__file__))


def pipelines() -> Dict[str, Callable]:
    """Returns every shipped pipeline function by its short name."""
    from kfdist.pipelines.mnist import PIPELINE_NAME, mnist_pipeline

    return {PIPELINE_NAME: mnist_pipeline}


def get_pipeline(name: str) -> Callable:
    """Returns the pipeline called `name`.

    Raises:
      InvalidInputError: If there is no such pipeline.
    """
    available = pipelines()
    if name not in available:
        raise InvalidInputError(f"unknown pipeline {name!r}; available: {sorted(available)}")
    return available[name]


def compiled_path(name: str, out_dir: str = PIPELINES_DIR) -> str:
    """Returns where the compiled YAML of pipeline `name` lives."""
    return os.path.join(out_dir, f"{name}.yaml")


def compile_pipeline(name: str, out_dir: str = PIPELINES_DIR) -> str:
    """Compiles pipeline `name` to `<out_dir>/<name>.yaml` and returns that path."""
    from kfp import compiler

    path = compiled_path(name, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    compiler.Compiler().compile(get_pipeline(name), package_path=path)
    return path
