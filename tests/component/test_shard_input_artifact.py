"""A pipeline of one's own prepares its data in a step and hands kfdist's shard step the `Dataset`.

Real kfp.local (each step a process of this Python): the first step writes scikit-learn's wine
table as CSV into its `Output[Dataset]` `wine` (the artifact a file, or a folder holding
`wine.csv`), the second is kfdist's `shard_dataset` with `source=` that output. Its dataset
holds the table's 178 rows and the model is named after the artifact (its output's name,
`wine`). Giving neither `source_uri` nor `source`, or both, fails the shard step at once with
one line naming both and the values given, and nothing written.
"""

import re
from typing import NamedTuple

import pytest
from kfp import dsl, local

from kfdist.components.common.dataset_spec import load_metadata
from kfdist.components.shard_dataset.component import shard_dataset
from kfdist.kfp_local_lines import ANSI

pytestmark = pytest.mark.slow

WINE_ROWS = 178
#: kfp.local's indent of a step's own lines.
STEP_LINE = re.compile(r"^ {4}(?P<line>.*\S)")
REFUSAL = ("kfdist.components.common.errors.InvalidInputError: give exactly one of source_uri "
           "(a path or a gs://, s3:// or minio:// URI) and source (an upstream step's Dataset); "
           "got ")


@dsl.component(install_kfp_package=False)
def prepare_wine(wine: dsl.Output[dsl.Dataset], as_folder: bool = False):
    """Writes scikit-learn's wine table (label column `target`) as CSV: the file `wine`, or
    `wine.csv` in the folder `wine`."""
    import os

    from sklearn.datasets import load_wine

    if as_folder:
        os.makedirs(wine.path, exist_ok=True)
    path = os.path.join(wine.path, "wine.csv") if as_folder else wine.path
    load_wine(as_frame=True).frame.to_csv(path, index=False)


def _shard(source_format: str = "csv", **source):
    return shard_dataset(label_column="target", source_format=source_format, num_shards=1,
                         **source)


@dsl.pipeline
def own_pipeline(as_folder: bool, source_format: str) -> NamedTuple(
        "Sharded", [("dataset", dsl.Dataset), ("serving_model_name", str)]):
    """Prepares the table in a step of its own, then shards that step's `Dataset`."""
    shard = _shard(source_format, source=prepare_wine(as_folder=as_folder).outputs["wine"])
    return NamedTuple("Sharded", [("dataset", dsl.Dataset), ("serving_model_name", str)])(
        dataset=shard.outputs["dataset"], serving_model_name=shard.outputs["serving_model_name"])


@dsl.pipeline
def both_given(source_uri: str):
    """Gives the shard step a path as well as the upstream `Dataset`."""
    _shard(source_uri=source_uri, source=prepare_wine().outputs["wine"])


@dsl.pipeline
def neither_given():
    """Gives the shard step no data."""
    _shard()


def _run(tmp_path, pipeline, raise_on_error: bool, **arguments):
    local.init(runner=local.SubprocessRunner(use_venv=False),
               pipeline_root=str(tmp_path / "pipeline_root"), raise_on_error=raise_on_error,
               enable_caching=False)
    return pipeline(**arguments).outputs


def _shard_step_lines(printed: str):
    """The lines the shard step's process printed, kfp.local's indent removed."""
    step = ANSI.sub("", printed).split("Executing task 'shard-dataset'", 1)[1]
    step = step.split("Task 'shard-dataset' finished", 1)[0]
    return [m["line"] for m in map(STEP_LINE.match, step.splitlines()) if m]


@pytest.mark.parametrize("as_folder, source_format", [(False, "csv"), (True, "auto")],
                         ids=["file", "folder"])
def test_the_shard_step_reads_an_upstream_dataset_and_names_the_model_after_it(
        tmp_path, capfd, as_folder, source_format):
    outputs = _run(tmp_path, own_pipeline, raise_on_error=True, as_folder=as_folder,
                   source_format=source_format)
    meta = load_metadata(outputs["dataset"].path)
    assert meta.splits["train"].num_examples + meta.splits["eval"].num_examples == WINE_ROWS
    assert min(meta.splits[s].num_examples for s in ("train", "eval")) > 0
    assert meta.num_classes == 3 and meta.label_column == "target"
    assert meta.source_uri.endswith("/prepare-wine/wine")  # the upstream artifact's URI
    assert outputs["serving_model_name"] == "wine"
    assert ("serving name: wine (after the data; serving_model_name sets another)"
            in _shard_step_lines(capfd.readouterr().out))


@pytest.mark.parametrize("case", ["neither", "both"])
def test_neither_or_both_fail_the_shard_step_at_once_in_one_line(tmp_path, capfd, case):
    csv = str(tmp_path / "wine.csv")
    if case == "both":
        outputs = _run(tmp_path, both_given, raise_on_error=False, source_uri=csv)
        got = rf"source_uri='{re.escape(csv)}' and source='\S+/prepare-wine/wine'"
    else:
        outputs = _run(tmp_path, neither_given, raise_on_error=False)
        got = "source_uri='' and no source"
    printed = capfd.readouterr().out
    assert outputs == {}
    assert "Inner task failed: 'shard-dataset'" in ANSI.sub("", printed)
    lines = _shard_step_lines(printed)
    assert re.fullmatch(re.escape(REFUSAL) + got, lines[-1])  # the error, the step's last line
    assert sum("give exactly one of" in line for line in lines) == 1
    assert not any(line.startswith("serving name:") for line in lines)  # before anything else
    assert not [p for p in (tmp_path / "pipeline_root").rglob("*")
                if p.parent.name == "shard-dataset" and p.name != "executor_output.json"]
