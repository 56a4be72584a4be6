"""The `kfdist` command line.

    kfdist sample-data mnist --out DIR    write the bundled sample as MNIST IDX files
    kfdist run mnist [--workers N] ...    run a pipeline on this machine (kfp.local)
    kfdist train --strategy S --output DIR ...   run the training step alone, then evaluate
    kfdist compile [--out-dir DIR]        compile every pipeline to YAML
    kfdist render --backend tfjob|mpijob ...  print the training job a step would create
    kfdist submit PIPELINE.yaml --host URL [--param k=v]... [--wait]   run it on a KFP cluster
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from typing import List, Optional

from kfdist.components.common.errors import InvalidInputError, KfdistError


def _add_sample_data(sub) -> None:
    p = sub.add_parser("sample-data", help="write a bundled sample dataset")
    p.add_argument("name", choices=["mnist"], help="sample to write")
    p.add_argument("--out", required=True, help="directory to write the files into")
    p.set_defaults(func=_cmd_sample_data)


def _add_run(sub) -> None:
    from kfdist.step_flags import add_step_flags

    p = sub.add_parser("run", help="run a pipeline locally with kfp.local")
    p.add_argument("pipeline", choices=["mnist"], help="pipeline to run")
    p.add_argument("--output", default="kfdist-run", help="run directory (default: %(default)s)")
    p.add_argument("--data", default=None,
                   help="MNIST IDX directory, local or gs:// (default: the bundled sample digits)")
    p.add_argument("--export-base", default=None, help="serving export base (default: OUTPUT/serving)")
    p.add_argument("--num-shards", type=int, default=4)
    p.add_argument("--eval-fraction", type=float, default=0.2)
    p.add_argument("--accuracy-threshold", type=float, default=0.9)
    p.add_argument("--serving-model-name", default="mnist")
    # The pipeline runs here; with a cluster backend its training step launches the job on the
    # cluster KUBECONFIG (or the in-cluster config) names. KFP itself sets run_id and task_name.
    add_step_flags(p, include=lambda param: param.name not in ("run_id", "task_name"))
    p.add_argument("--no-cache", dest="cache", action="store_false",
                   help="run every step, even the shard step whose output an earlier run with "
                        "the same data and parameters left")
    p.add_argument("--verbose", action="store_true",
                   help="print every line of every step (always kept in OUTPUT/logs/<step>.log)")
    p.set_defaults(func=_cmd_run)


def _add_compile(sub) -> None:
    p = sub.add_parser("compile", help="compile every pipeline to YAML")
    p.add_argument("--out-dir", default=None,
                   help="directory for <pipeline>.yaml (default: beside the pipeline sources)")
    p.set_defaults(func=_cmd_compile)


def _cmd_sample_data(args) -> int:
    from kfdist.sample_data import SAMPLES

    written = SAMPLES[args.name](args.out)
    print(json.dumps(written))
    return 0


def _cmd_run(args) -> int:
    from kfdist.local_run import MnistRunOptions, format_summary, run_mnist
    from kfdist.step_flags import step_values

    summary = run_mnist(MnistRunOptions(
        output_dir=args.output, source_uri=args.data, export_base=args.export_base,
        training=step_values(args), num_shards=args.num_shards, eval_fraction=args.eval_fraction,
        accuracy_threshold=args.accuracy_threshold, serving_model_name=args.serving_model_name,
        cache=args.cache, verbose=args.verbose))
    print(format_summary(summary))
    return 0


def _cmd_compile(args) -> int:
    from kfdist.pipelines import registry

    out_dir = args.out_dir or registry.PIPELINES_DIR
    for name in sorted(registry.pipelines()):
        print(registry.compile_pipeline(name, out_dir))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Returns the argument parser of the `kfdist` command."""
    parser = argparse.ArgumentParser(prog="kfdist", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    from kfdist.render_cmd import add_render_parser
    from kfdist.submit import add_submit_parser
    from kfdist.train_cmd import add_train_parser

    for add in (_add_sample_data, _add_run, add_train_parser, _add_compile, add_render_parser,
                add_submit_parser):
        add(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `kfdist` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*non-Python base image.*")
    try:
        return args.func(args)
    except InvalidInputError as err:
        print(f"kfdist: invalid input: {err}", file=sys.stderr)
        return 2
    except KfdistError as err:
        print(f"kfdist: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
