"""The name `kfdist run` exports (serves) a model under, and the line that says it.

The rule is the pipelines' own (`kfdist.components.common.serving_name`): after
the data, unless `--serving-model-name` gives one; a run on a bundled sample is
named after the sample's table (`penguins`).
"""

from __future__ import annotations

import os
from typing import Optional

from kfdist.components.common.serving_name import name_after_data, name_of_data


def name_of_run_data(source_uri: Optional[str], sample: str) -> Optional[str]:
    """The serving name a run's data gives: its source's (a relative path taken from here),
    or with none the bundled `sample`'s (the penguins table: `penguins`)."""
    from kfdist.sample_data import SAMPLE_FILES

    if source_uri is None:
        return name_after_data(os.path.join(sample, SAMPLE_FILES.get(sample, "")))
    return name_of_data(source_uri)


def serving_line(opts, export_base: str) -> str:
    """The line `kfdist run` says what name the model is exported under with, and why that one.

    Args:
      opts: The run's `local_run.RunOptions`.
      export_base: Where models are exported.
    """
    why = ("--serving-model-name" if opts.serving_model_name else
           "after the data; --serving-model-name sets another"
           if name_of_run_data(opts.source_uri, opts.sample) else
           "the pipeline's; --serving-model-name sets another")
    return f"serving name: {opts.serving_name} ({why}), under {export_base}"
