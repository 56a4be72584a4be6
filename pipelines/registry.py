"""The pipelines kfdist ships, by name, and their compiled YAML files."""

import os
from typing import Callable, Dict

from kfdist.components.common.errors import InvalidInputError
from kfdist.pipelines.definition import DISTRIBUTED
from kfdist.pipelines.shipped import DEFINITIONS

PIPELINES_DIR = os.path.dirname(os.path.abspath(__file__))
#: The pipelines that train kfdist's own models (each has a bundled sample).
PIPELINE_NAMES = tuple(name for name, d in DEFINITIONS.items() if d.trainer == DISTRIBUTED)
#: Every shipped pipeline's short name (modules `pipelines/<name>.py`, compiled to YAML); `program`
#: trains with the user's own program (`train_program`).
SHIPPED_PIPELINES = tuple(DEFINITIONS)


def pipelines() -> Dict[str, Callable]:
    """Returns every shipped pipeline function by its short name."""
    import importlib

    return {name: getattr(importlib.import_module(f"kfdist.pipelines.{name}"), f"{name}_pipeline")
            for name in SHIPPED_PIPELINES}


def get_pipeline(name: str) -> Callable:
    """Returns the pipeline called `name`.

    Raises:
      InvalidInputError: If there is no such pipeline.
    """
    get_definition(name)  # refuses an unknown name
    return pipelines()[name]


def get_definition(name: str):
    """Returns the `PipelineDefinition` of pipeline `name` (without building the pipeline).

    Raises:
      InvalidInputError: If there is no such pipeline.
    """
    if name not in DEFINITIONS:
        raise InvalidInputError(f"unknown pipeline {name!r}; available: {sorted(DEFINITIONS)}")
    return DEFINITIONS[name]


def compiled_path(name: str, out_dir: str = PIPELINES_DIR) -> str:
    """Returns where the compiled YAML of pipeline `name` lives."""
    return os.path.join(out_dir, f"{name}.yaml")


def compile_pipeline(name: str, out_dir: str = PIPELINES_DIR, images=None) -> str:
    """Compiles pipeline `name` to `<out_dir>/<name>.yaml` and returns that path.

    Args:
      name: A shipped pipeline's name.
      out_dir: Directory of the YAML.
      images: `(registry, tag)` of kfdist's images (tag None: kfdist's version), or None for
        kfdist's published ones (see `kfdist.images.retarget_pipeline`).

    Returns:
      The path of the YAML written.
    """
    from kfp import compiler

    path = compiled_path(name, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    compiler.Compiler().compile(get_pipeline(name), package_path=path)
    if images is not None:
        from kfdist.images import retarget_pipeline

        with open(path) as f:
            text = retarget_pipeline(f.read(), *images)
        with open(path, "w") as f:
            f.write(text)
    return path
