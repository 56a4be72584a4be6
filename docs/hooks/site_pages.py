"""MkDocs hook: the pages written when the site is built, so none is committed or goes stale.

- `index.md`: the repository's README, its `docs/...` links made relative to the site;
- `reference/cli.md`, `reference/components.md`, `reference/pipelines.md`: from the code's own
  definitions (`cli_reference`, `component_reference`);
- `benchmarks/results.md`: `benchmarks/results.md` as the last benchmark run wrote it.
- `benchmarks/peers.md`: `benchmarks/results-peers.md`, the peer and library-path tables.
"""

from __future__ import annotations

import os
import re

from mkdocs.structure.files import File

from cli_reference import cli_reference
from component_reference import component_reference, pipeline_reference

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))


def readme_page() -> str:
    """The README as the site's home page: `](docs/x.md)` links become `](x.md)`."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return re.sub(r"\]\(docs/", "](", text)


def _benchmark_file_body(name: str) -> str:
    """`benchmarks/<name>` without its own title (the page's title replaces it)."""
    with open(os.path.join(ROOT, "benchmarks", name), encoding="utf-8") as f:
        return re.sub(r"\A# .*\n", "", f.read())


def benchmark_results_page() -> str:
    """`benchmarks/results.md` under a title of the site's."""
    return ("# Latest results\n\n`benchmarks/results.md` as the last `python -m benchmarks` "
            "run wrote it (see [Benchmarks](index.md) for what each figure measures).\n\n"
            + _benchmark_file_body("results.md"))


def peer_results_page() -> str:
    """`benchmarks/results-peers.md` (written from `results.json`) under a title of the site's."""
    return ("# Beside TFX and the libraries\n\n`benchmarks/results-peers.md`, written from "
            "`results.json` by the benchmark runs that measure them (see "
            "[Benchmarks](index.md) for what each figure measures).\n\n"
            + _benchmark_file_body("results-peers.md"))


def generated_pages() -> dict:
    """Every generated page's content by its path in the site."""
    return {
        "index.md": readme_page(),
        "reference/cli.md": cli_reference(),
        "reference/components.md": component_reference(),
        "reference/pipelines.md": pipeline_reference(),
        "benchmarks/results.md": benchmark_results_page(),
        "benchmarks/peers.md": peer_results_page(),
    }


def on_files(files, config):
    """Adds the generated pages to the site's files (MkDocs event)."""
    for path, content in generated_pages().items():
        files.append(File.generated(config, path, content=content))
    return files
