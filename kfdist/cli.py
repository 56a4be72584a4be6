"""The `kfdist` command line.

    kfdist sample-data mnist|images|tabular --out DIR   write a bundled sample
    kfdist run mnist|tabular|images [--data D] ...     run a pipeline on this machine (kfp.local)
    kfdist train --strategy S --output DIR ...   run the training step alone, then evaluate
    kfdist compile [--out-dir DIR]        compile every pipeline to YAML (default: .)
    kfdist render --backend tfjob|mpijob ...  print the training job a step would create
    kfdist submit PIPELINE.yaml --host URL [--param k=v]... [--wait]   run it on a KFP cluster
    kfdist tensorboard PATH               serve a run's (or a cluster job's) training curves
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import warnings
from typing import List, Optional

from kfdist.cli_parser import CommandParser
from kfdist.components.common.errors import InvalidInputError, KfdistError


def _add_sample_data(sub) -> None:
    from kfdist.sample_data import SAMPLE_DESCRIPTIONS, SAMPLES

    p = sub.add_parser("sample-data", help="write a bundled sample dataset (no download)")
    p.add_argument("name", choices=sorted(SAMPLES),
                   help="sample to write: " + "; ".join(
                       f"{name} ({SAMPLE_DESCRIPTIONS[name]})" for name in sorted(SAMPLES)))
    p.add_argument("--out", required=True, help="directory to write the files into")
    p.set_defaults(func=_cmd_sample_data)


def _add_run(sub) -> None:
    from kfdist.step_flags import add_step_flags

    from kfdist.pipelines.registry import SHIPPED_PIPELINES
    from kfdist.run_program import add_program_flags, run_backends

    p = sub.add_parser("run", help="run a pipeline locally with kfp.local")
    p.add_argument("pipeline", choices=SHIPPED_PIPELINES,
                   help="mnist: MNIST IDX files; tabular: a CSV table; images: TFRecord images or "
                        "a folder of images, one sub-folder per class; "
                        "program: any of them, trained by your own program (--command)")
    p.add_argument("--output", default="kfdist-run", help="run directory (default: %(default)s)")
    p.add_argument("--data", dest="source_uri", default=None, metavar="URI",  # its parameter
                   help="the source, local or gs://, s3://, minio:// (AWS_* variables): an MNIST "
                        "IDX directory (mnist), a CSV file or directory (tabular), TFRecord "
                        "files or a folder of PNG/JPEG files in one sub-folder per class "
                        "(images); default: the pipeline's bundled sample")
    p.add_argument("--label-column", default=None,
                   help="tabular/images in TFRecords: the label's column or feature "
                        "(default: label; the penguins sample's: species)")
    p.add_argument("--image-feature", default="",
                   help="images: the bytes feature holding the image (default: the only one)")
    p.add_argument("--exclude-columns", type=_column_list, default=(), metavar="A,B",
                   help="tabular: columns to leave out of the dataset and the model (an id, a "
                        "leaky column)")
    p.add_argument("--keep-columns", type=_column_list, default=(), metavar="A,B",
                   help="tabular: string columns to keep although they identify rows (by "
                        "default a string column with a distinct value in nearly every train "
                        "row, such as an id or a date, is left out and the shard log says so)")
    _add_task_flag(p)
    p.add_argument("--export-base", default=None, help="serving export base (default: OUTPUT/serving)")
    _add_shard_flags(p)
    for name in ("reference_dataset", "allow_anomalies", "categorical_drift_threshold",
                 "numeric_drift_threshold", "accuracy_threshold", "rmse_threshold",
                 "min_improvement", "allow_class_change"):
        _add_pipeline_flag(p, name)
    p.add_argument("--slice-columns", type=_column_list, default=(), metavar="A,B",
                   help="table columns to slice the held-out split by: the evaluation reports "
                        "each value's examples, accuracy and loss (numbers with many values: "
                        "by quantile bins), e.g. island,year")
    p.add_argument("--serving-model-name", default=None,
                   help="model name in the serving layout, OUTPUT/serving/NAME/VERSION (default: "
                        "after the data: the CSV file's or folder's name, e.g. penguins)")
    # The pipeline runs here; with a cluster backend its training step launches the job on the
    # cluster KUBECONFIG (or the in-cluster config) names. KFP itself sets run_id and task_name.
    add_step_flags(p, include=lambda param: param.name not in ("run_id", "task_name"),
                   defaults_from="the pipeline's", choices={"backend": run_backends()})
    add_program_flags(p)
    _add_run_control(p)
    p.set_defaults(func=_cmd_run)


def _add_task_flag(p) -> None:
    """`--task`, the tabular pipeline's parameter: its default and meaning as it defines them."""
    from kfdist.components.common.dataset_spec import TASKS
    from kfdist.pipelines.shipped import TABULAR

    default, meaning = next(param[2:] for param in TABULAR.source_params if param[0] == "task")
    p.add_argument("--task", default=default, choices=TASKS,
                   help=f"{meaning.rstrip('.')} (tabular; default: %(default)s)")


def _add_shard_flags(p) -> None:
    """`kfdist run`'s flags of how the shard step splits and shards the source."""
    from kfdist.components.shard_dataset.splits import SPLIT_METHODS

    _add_pipeline_flag(p, "num_shards")
    p.add_argument("--split", default="auto", choices=SPLIT_METHODS,
                   help="auto: keep the source's train*/test* files apart when it names them, "
                        "else hash; predefined: insist on them; hash: hold out --eval-fraction "
                        "by a stable hash of each example (a table's row: its file and "
                        "position, whichever columns are read)")
    _add_pipeline_flag(p, "eval_fraction")
    p.add_argument("--shard-runner", default="local", choices=("local", "beam"),
                   help="who shards the source: local (the shard step's process) or beam (an "
                        "Apache Beam pipeline building the same dataset)")
    p.add_argument("--beam-option", dest="beam_options", action="append", default=[],
                   metavar="KEY=VALUE",
                   help="a Beam pipeline option for --shard-runner beam, e.g. "
                        "runner=DataflowRunner (repeat it; default: Beam's local runner, one "
                        "worker process per core)")


def _add_pipeline_flag(p, name: str) -> None:
    """Adds the flag of the pipeline parameter `name`, its type, default and meaning as every
    pipeline defines them (`definition.common_params`)."""
    from kfdist.pipelines.definition import common_params

    kind, default, meaning = next(param[1:] for param in common_params("") if param[0] == name)
    if kind is bool:  # a switch
        p.add_argument("--" + name.replace("_", "-"), action="store_true", help=meaning)
        return
    p.add_argument("--" + name.replace("_", "-"), type=kind, default=default,
                   help=f"{meaning.rstrip('.')} (default: {'%(default)s' if default != '' else 'none'})")


def _add_run_control(p) -> None:
    """`kfdist run`'s flags of how the steps run: caching, runner, verbosity."""
    from kfdist.local_run import RUNNERS

    p.add_argument("--no-cache", dest="cache", action="store_false",
                   help="run every step, even the shard step whose output an earlier run with "
                        "the same data and parameters left")
    p.add_argument("--runner", default="subprocess", choices=RUNNERS,
                   help="how the steps run: as processes of this Python, or each in kfdist's "
                        "runtime image (from --registry/--tag) as Kubeflow Pipelines runs it, "
                        "through Docker or Podman (default: %(default)s)")
    p.add_argument("--verbose", action="store_true",
                   help="print every line of every step (always kept in OUTPUT/logs/<step>.log)")
    add_image_flags(p)  # the steps' image (--runner docker), a cluster job's replicas' images


def _column_list(text: str) -> tuple:
    """`A,B` as `("A", "B")` (an argparse type: a bad list is a usage error naming it)."""
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of column "
                                         "names, e.g. id,date")
    return names


def _add_compile(sub) -> None:
    p = sub.add_parser("compile", help="compile every pipeline to YAML")
    p.add_argument("--out-dir", default=".",
                   help="directory for <pipeline>.yaml, created when missing (default: the "
                        "current directory)")
    add_image_flags(p)
    p.set_defaults(func=_cmd_compile)


def add_image_flags(parser) -> None:
    """Adds --registry and --tag (where kfdist's images are published) to `parser`."""
    parser.add_argument("--registry", default=None, metavar="REGISTRY",
                        help="registry and namespace of kfdist's images, as `containers/build.sh "
                             "--registry` pushed them (default: ghcr.io/kfdist)")
    parser.add_argument("--tag", default=None, metavar="TAG",
                        help="tag of kfdist's images (default: kfdist's version)")


def image_target(args):
    """(registry, tag) from --registry/--tag, checked; None when neither is given."""
    from kfdist import DEFAULT_REGISTRY
    from kfdist.images import check_registry, check_tag

    if args.registry is None and args.tag is None:
        return None
    return (check_registry(args.registry if args.registry is not None else DEFAULT_REGISTRY),
            check_tag(args.tag) if args.tag is not None else None)


def _cmd_sample_data(args) -> int:
    from kfdist.out_dirs import make_out_dir
    from kfdist.sample_data import SAMPLES

    make_out_dir(args.out, "--out")
    written = SAMPLES[args.name](args.out)
    print(json.dumps(written))
    return 0


def run_options(args):
    """The `RunOptions` of parsed `kfdist run` arguments (--registry/--tag checked)."""
    import shlex

    from kfdist.local_run import RunOptions
    from kfdist.run_program import PROGRAM_ONLY_SETTINGS
    from kfdist.step_flags import step_values

    training = step_values(args)
    given = dict(vars(args), command=shlex.split(args.program_command)
                 if hasattr(args, "program_command") else None)
    training.update({name: given[name] for name in PROGRAM_ONLY_SETTINGS
                     if given.get(name) is not None})
    return RunOptions(
        output_dir=args.output, pipeline=args.pipeline, source_uri=args.source_uri,
        label_column=args.label_column, image_feature=args.image_feature, split=args.split,
        task=args.task, rmse_threshold=args.rmse_threshold,
        exclude_columns=args.exclude_columns, keep_columns=args.keep_columns,
        export_base=args.export_base, training=training, num_shards=args.num_shards,
        eval_fraction=args.eval_fraction, shard_runner=args.shard_runner,
        beam_options=tuple(args.beam_options),
        reference_dataset=args.reference_dataset, allow_anomalies=args.allow_anomalies,
        categorical_drift_threshold=args.categorical_drift_threshold,
        numeric_drift_threshold=args.numeric_drift_threshold,
        accuracy_threshold=args.accuracy_threshold, min_improvement=args.min_improvement,
        allow_class_change=args.allow_class_change, slice_columns=args.slice_columns,
        serving_model_name=args.serving_model_name,
        cache=args.cache, verbose=args.verbose, runner=args.runner, images=image_target(args))


def _cmd_run(args) -> int:
    from kfdist.flag_wording import command_wording
    from kfdist.local_run import run_pipeline
    from kfdist.run_summary import format_summary

    # The steps name their parameters (the verdict's reason); the user gave flags.
    print(command_wording("run")(format_summary(run_pipeline(run_options(args)))))
    return 0


def _cmd_compile(args) -> int:
    from kfdist.pipelines import registry
    from kfdist.out_dirs import make_out_dir

    out_dir = args.out_dir
    target = image_target(args)
    make_out_dir(out_dir, "--out-dir")
    for name in sorted(registry.pipelines()):
        print(registry.compile_pipeline(name, out_dir, images=target))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Returns the argument parser of the `kfdist` command."""
    parser = CommandParser(prog="kfdist", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True,
                                help="what to do; `kfdist COMMAND --help` tells more")
    from kfdist.launch_cmd import add_launch_parser
    from kfdist.render_cmd import add_render_parser
    from kfdist.submit import add_submit_parser
    from kfdist.tensorboard_cmd import add_tensorboard_parser
    from kfdist.train_cmd import add_train_parser

    for add in (_add_sample_data, _add_run, add_train_parser, _add_compile, add_render_parser,
                add_submit_parser, add_launch_parser, add_tensorboard_parser):
        add(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `kfdist` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from kfdist.components.common import own_env

    own_env.use_own_env()  # before TensorFlow loads here or in a step; never a user's program's
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*non-Python base image.*")
    from kfdist.components.train_distributed.kubernetes.lifecycle.step_signals import StepCancelled
    from kfdist.stopping import stop_on_signals

    try:
        with stop_on_signals():
            return args.func(args)
    except StepCancelled as cancelled:
        print(f"kfdist: stopped by {signal.Signals(cancelled.signum).name}: {args.command} and "
              "every process it had started have ended; what was already written is kept",
              file=sys.stderr)
        return cancelled.exit_code
    except InvalidInputError as err:
        from kfdist.flag_wording import flags_of, in_flag_terms

        # A component's check names its parameter; the user gave the command's flag.
        print(f"kfdist: invalid input: {in_flag_terms(str(err), flags_of(parser.chosen(args)))}",
              file=sys.stderr)
        return 2
    except KfdistError as err:
        print(f"kfdist: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
