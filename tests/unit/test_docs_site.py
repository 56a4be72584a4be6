"""The documentation site builds with `mkdocs build --strict` (no broken link, anchor or missing
page) from the `docs` extra alone (the test extra's packages and PyTorch cannot be imported while
it builds), and its generated pages hold every command, flag, component input and pipeline
parameter the code defines, and the benchmarks' latest results."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib

import pytest

from doc_shell_blocks import ROOT
from kfdist.cli import build_parser

#: At most this many lines in the README (issue: a newcomer reads it in five minutes).
README_MAX_LINES = 300


#: `mkdocs build --strict --site-dir DIR` with the modules named after DIR unimportable.
BUILD_WITHOUT = """
import importlib.abc, sys
out, blocked = sys.argv[1], set(sys.argv[2:])
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"{name} is not in the docs extra")
sys.meta_path.insert(0, Refuse())
from mkdocs.__main__ import cli
sys.argv = ["mkdocs", "build", "--strict", "--site-dir", out]
cli()
"""


def _extras():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[\w.-]+", requirement).group(0)).lower()


def _modules_outside_the_docs_extra():
    """The modules of what the test, torch and docker extras install beside the docs extra."""
    extras = _extras()
    others = {_name(r) for extra in ("test", "torch", "docker") for r in extras[extra]
              if not r.startswith("kfdist[")} - {_name(r) for r in extras["docs"]}
    return sorted({module for module, dists in importlib.metadata.packages_distributions().items()
                   if any(_name(d) in others for d in dists)})


def test_the_test_extra_holds_the_docs_extra_and_the_docs_extra_no_tool_of_the_tests():
    extras = _extras()
    assert "kfdist[docs]" in extras["test"]
    assert {_name(r) for r in extras["docs"]} == {"mkdocs", "mkdocs-material"}
    assert {"torch", "pytest", "docker"} <= set(_modules_outside_the_docs_extra())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-c", BUILD_WITHOUT, str(out),
                           *_modules_outside_the_docs_extra()], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return out


def _page(site, path: str) -> str:
    with open(site / path / "index.html" if path else site / "index.html", encoding="utf-8") as f:
        return f.read()


def _parsers(parser, path=("kfdist",)):
    yield path, parser
    for name, sub in parser.subcommands().items():
        yield from _parsers(sub, path + (name,))


def test_the_readme_is_short_and_has_contents():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    assert any(line.startswith("**Contents:**") for line in lines[:20])


def test_generated_pages_are_not_committed():
    for path in ("index.md", "reference/cli.md", "reference/components.md",
                 "reference/pipelines.md", "benchmarks/results.md", "benchmarks/peers.md"):
        assert not os.path.exists(os.path.join(ROOT, "docs", path)), path


def test_the_home_page_is_the_readme_with_links_into_the_site(site):
    home = _page(site, "")
    assert "From your laptop to the cluster: one flag" in home
    assert 'href="guide/data/"' in home and 'href="docs/' not in home


def test_every_command_and_flag_is_in_the_reference(site):
    page = _page(site, "reference/cli")
    for path, parser in list(_parsers(build_parser()))[1:]:
        assert f"<code>{' '.join(path)}</code>" in page, path
        for action in parser._actions:
            if action.help is argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"<code>{option}" in page, (path, option)


def test_every_component_input_and_pipeline_parameter_is_in_the_reference(site):
    from kfdist.pipelines import registry

    sys.path.insert(0, os.path.join(ROOT, "docs", "hooks"))
    try:
        from component_reference import components
    finally:
        sys.path.remove(os.path.join(ROOT, "docs", "hooks"))
    found = components()
    assert {"shard_dataset", "train_distributed", "evaluate_model", "export_saved_model",
            "train_program"} <= set(found)
    for page, specs in (("reference/components", {n: c.component_spec for n, c in found.items()}),
                        ("reference/pipelines", {n: p.component_spec for n, p in
                                                 registry.pipelines().items()})):
        html = _page(site, page)
        for name, spec in specs.items():
            assert f"<code>{name}</code>" in html, name
            for parameter in spec.inputs:
                assert f"<code>{parameter}</code>" in html, (name, parameter)


@pytest.mark.parametrize("source, path", [("results.md", "benchmarks/results"),
                                          ("results-peers.md", "benchmarks/peers")])
def test_the_benchmark_results_pages_are_the_files_the_benchmarks_write(site, source, path):
    with open(os.path.join(ROOT, "benchmarks", source), encoding="utf-8") as f:
        headings = [line[3:].strip() for line in f if line.startswith("## ")]
    page = _page(site, path)
    assert headings and all(heading.split(" (")[0] in page for heading in headings), headings
