"""The component and pipeline reference pages, written from their KFP specs.

Each component's and pipeline's inputs, types, defaults and descriptions come from the
`component_spec` KFP builds from the Python definition and its docstring: the text the KFP UI
shows, defined once beside the code.
"""

from __future__ import annotations

import importlib
import json
import os
from typing import List

from markdown_tables import cell, table

#: The folder of kfdist's components (one sub-folder with a `component.py` each).
COMPONENTS_DIR = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "components")


def _default(spec) -> str:
    """An input's default as JSON in a code span, empty when it has none."""
    if spec.default is None:
        return "" if not spec.optional else "`None`"
    return f"`{json.dumps(spec.default)}`"


def _type(spec) -> str:
    """An input's or output's type: `Integer`, `system.Dataset`, ..."""
    return f"`{str(spec.type).split('@')[0]}`"


def _spec_section(title: str, spec) -> List[str]:
    """The Markdown of one component's or pipeline's description, inputs and outputs."""
    lines = [f"## `{title}`", ""]
    if spec.description:
        lines += [spec.description.strip(), ""]
    lines += table(("input", "type", "default", "meaning"),
                   [(f"`{name}`", _type(i), _default(i), cell(i.description or ""))
                    for name, i in (spec.inputs or {}).items()]) + [""]
    if spec.outputs:
        lines += table(("output", "type"),
                       [(f"`{name}`", _type(o)) for name, o in spec.outputs.items()]) + [""]
    return lines


def components() -> dict:
    """Every component kfdist ships, by the name of its Python function."""
    found = {}
    for folder in sorted(os.listdir(COMPONENTS_DIR)):
        if not os.path.isfile(os.path.join(COMPONENTS_DIR, folder, "component.py")):
            continue
        module = importlib.import_module(f"kfdist.components.{folder}.component")
        for name, value in vars(module).items():
            if hasattr(value, "component_spec") and getattr(value, "python_func", None) \
                    and value.python_func.__module__ == module.__name__:
                found[name] = value
    return found


def component_reference() -> str:
    """The Markdown page of every component's inputs and outputs."""
    lines = ["# Components", "",
             "Generated from each component's KFP spec (its Python signature and docstring) when "
             "the site is built. Import one from `kfdist.components.<folder>.component`.", ""]
    for name, component in components().items():
        lines += _spec_section(name, component.component_spec)
    return "\n".join(lines) + "\n"


def pipeline_reference() -> str:
    """The Markdown page of every shipped pipeline's parameters."""
    from kfdist.pipelines import registry

    lines = ["# Pipelines", "",
             "Generated from each pipeline's KFP spec when the site is built: the parameters a "
             "run takes (`kfdist submit --param NAME=VALUE`, the KFP UI's run form). "
             "`kfdist compile` writes them as `<name>.yaml`.", ""]
    for name, pipeline in registry.pipelines().items():
        lines += _spec_section(name, pipeline.component_spec)
    return "\n".join(lines) + "\n"
