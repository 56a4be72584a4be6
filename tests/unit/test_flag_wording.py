"""A command's errors name its flags (`--namespace`), not the pipeline parameters behind them
(`pass namespace`), while the components' own messages keep the parameter names KFP users set.

The bad inputs go through the real CLI's entry point, in-process; each fails in the checks,
before anything is written or started.
"""

from __future__ import annotations

import re

import pytest

from kfdist import cli, render_cmd
from kfdist.cli_parser import CommandParser
from kfdist.components.common.errors import InvalidInputError
from kfdist.flag_wording import flags_of, in_flag_terms
from kfdist.render_cmd import add_render_parser

RENDER = ["render", "--backend", "tfjob"]
#: A parameter name as a component's check writes it, where the command has a flag for it.
PARAMETER_WORDING = re.compile(r"\b(pass|set) (namespace|work_uri|pvc_name|chief)\b|\b\w+_\w+=|"
                               r"the dataset is at None")


@pytest.fixture(autouse=True)
def _outside_a_cluster(monkeypatch):
    monkeypatch.delenv("KFP_POD_NAMESPACE", raising=False)


@pytest.mark.parametrize("argv, said", [
    ([*RENDER, "--work-uri", "gs://b/w"], "namespace is unknown outside a cluster: pass --namespace"),
    ([*RENDER, "--namespace", "ml"],
     "pass --work-uri (gs://BUCKET/PREFIX, s3://BUCKET/PREFIX, or a path on the PVC named by "
     "--pvc-name)"),
    (["run", "mnist", "--backend", "tfjob", "--namespace", "ml", "--work-uri", "/mnt/x"],
     "--work-uri '/mnt/x' is a path, which the replicas can only share through a volume: pass "
     "--pvc-name as well, or use a gs://, s3:// or minio:// --work-uri"),
    (["render", "--backend", "mpijob", "--strategy", "horovod", "--chief", "--namespace", "ml",
      "--work-uri", "gs://b/w"], "has no chief (rank 0 leads): leave out --chief"),
    ([*RENDER, "--namespace", "ml", "--work-uri", "gs://b/w", "--batch-size", "0"],
     "--batch-size must be an integer >= 1, got 0"),
    (["run", "mnist", "--backend", "tfjob"],  # both missing settings at once
     "unknown outside a cluster: pass --namespace; no shared location for the replicas (the "
     "dataset is at"),
])
def test_bad_input_names_the_flags_given(argv, said, tmp_path, capsys):
    if argv[0] == "run":
        argv = [*argv, "--output", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    [line] = err.splitlines()
    assert line.startswith("kfdist: invalid input: ") and said in line, line
    assert not PARAMETER_WORDING.search(line), line
    assert not (tmp_path / "out").exists()


def test_the_components_own_message_keeps_the_parameter_names():
    parser = CommandParser(prog="kfdist")
    add_render_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([*RENDER, "--work-uri", "gs://b/w"])
    with pytest.raises(InvalidInputError, match="pass namespace$"):
        render_cmd.render_from_args(args)  # what a KFP user of the component reads


def _flags(*argv):
    parser = cli.build_parser()
    return flags_of(parser.chosen(parser.parse_args(list(argv or RENDER))))


@pytest.mark.parametrize("message, expected", [
    # Values, paths and other flags are not names.
    ("--dataset '/data/work_uri/namespace' has no 'train' split",
     "--dataset '/data/work_uri/namespace' has no 'train' split"),
    ("namespace 'Bad_NS' is not a DNS-1123 label", "--namespace 'Bad_NS' is not a DNS-1123 label"),
    ("the job's namespace and the replicas' image", "the job's namespace and the replicas' image"),
    ("job name 'x' is not a DNS-1035 label", "job name 'x' is not a DNS-1035 label"),
    # A setting with its value; switches.
    ("set ps=0 or strategy=parameter_server", "set --ps 0 or --strategy parameter_server"),
    ("input_sharding='file' needs a file", "--input-sharding 'file' needs a file"),
    ("evaluator=True, chief=False", "--evaluator, no --chief"),
    # `kfdist submit`'s pipeline arguments stay what they are.
    ("pass --param namespace=...", "pass --param namespace=..."),
])
def test_only_names_used_as_settings_become_flags(message, expected):
    assert in_flag_terms(message, _flags()) == expected


def test_a_value_the_flag_does_not_take_is_not_that_flag():
    run = _flags("run", "tabular")
    # A Beam option of --beam-option, not `kfdist run --runner subprocess|docker`.
    beam = "source_uri '/x.csv' is on this machine but runner=DataflowRunner runs the workers"
    assert in_flag_terms(beam, run) == (
        "--data '/x.csv' is on this machine but runner=DataflowRunner runs the workers")
    assert in_flag_terms("use runner=docker", run) == "use --runner docker"


def _failed_step_log(error: Exception) -> list:
    """A failed step's lines as kfp's executor prints them: a traceback, then the error."""
    return ["[worker-0] replica worker:0 started", "Traceback (most recent call last):",
            '  File "/x/kfp/dsl/executor.py", line 453, in execute',
            "    result = self.func(**func_kwargs)",
            f"kfdist.components.common.errors.{type(error).__name__}: {error}"]


def test_a_failed_steps_error_on_the_run_console_names_the_flags_of_kfdist_run():
    """The step's own message keeps the parameter names a KFP user sets; `kfdist run`'s console,
    which shows its last line, names the flags the person typed."""
    from kfdist.components.common import dataset_spec as ds
    from kfdist.components.train_distributed.job.strategy_rules import batch_for_split
    from kfdist.components.train_distributed.replica.input_pipeline import steps_per_epoch
    from kfdist.step_errors import without_kfdist_traceback

    with pytest.raises(InvalidInputError) as too_few:
        batch_for_split(2, 64, 3)
    meta = ds.DatasetMetadata(
        source_uri="x", source_format="csv", feature=ds.FeatureSpec(ds.FEATURES_KEY, "float32",
                                                                    (4,)),
        num_classes=3, preprocessing=ds.Preprocessing("scale", 1.0, 0.0), compression=None,
        seed=0, eval_fraction=0.2,
        splits={"train": ds.SplitInfo(100, (ds.ShardInfo("train/s0", 100, "0", 100),))})
    with pytest.raises(InvalidInputError) as batch:
        steps_per_epoch(meta, 128)
    assert "batch_size_per_replica" in str(batch.value) and "workers must" in str(too_few.value)
    for error, said in ((too_few.value, "; --workers must be fewer, as each process trains"),
                        (batch.value, "; lower --batch-size or the number of workers")):
        [*_, shown] = without_kfdist_traceback(_failed_step_log(error))
        assert shown.startswith("InvalidInputError: ") and said in shown, shown
        assert not PARAMETER_WORDING.search(shown) and "batch_size_per_replica" not in shown
