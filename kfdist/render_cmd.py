"""`kfdist render`: print the TFJob, MPIJob or TrainJob a training step creates, as YAML.

The same parameters as the `train_distributed` component (flags from
`job.step_params`), the same code path as the step: what is printed is the
object the step would create, ready for `kubectl apply -f -` once the job's
work files are at its work location (`--stage` writes them). Examples:

    kfdist render --backend tfjob --strategy multi_worker_mirrored --workers 3 --chief \\
        --gpus-per-worker 4 --namespace team-a --work-uri gs://bucket/jobs/mnist
    kfdist render --backend mpijob --strategy horovod --workers 4 --slots-per-worker 2 \\
        --namespace team-a --pvc-name kfdist-work --work-uri /mnt/kfdist/jobs/mnist \\
        --dataset runs/demo/dataset --stage
    kfdist render --backend trainjob --strategy parameter_server --workers 4 --ps 2 \\
        --namespace team-a --work-uri gs://bucket/jobs/mnist --trainer-version 2.1
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional

from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.yaml_text import to_yaml


def add_render_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the `render` command to the `kfdist` subparsers.

    Args:
      subparsers: What `ArgumentParser.add_subparsers()` returned.

    Returns:
      The `render` parser (its handler is `run_render`, set as `func`).
    """
    from kfdist.step_flags import add_step_flags

    from kfdist.components.train_distributed.kubernetes.build.render_trainjob import (
        CUSTOMISATION_BY_RELEASE)

    p = subparsers.add_parser("render", help="print the TFJob/MPIJob/TrainJob a training step creates",
                              description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default=None,
                   help="local kfdist dataset directory; with --stage it is uploaded to the work "
                        "location")
    p.add_argument("--dataset-uri", default=None,
                   help="where the dataset artifact is, as the step gets it from KFP (a gs://, "
                        "s3:// or minio:// dataset is read in place, and gives the default work "
                        "location)")
    p.add_argument("--stage", action="store_true",
                   help="also write the job's work files (job.json, and the dataset unless it is "
                        "remote) to the work location, so that `kubectl apply` of the output runs")
    p.add_argument("--trainer-version", default=max(CUSTOMISATION_BY_RELEASE),
                   choices=sorted(CUSTOMISATION_BY_RELEASE),
                   help="Kubeflow Trainer release the TrainJob is for (the step reads it from the "
                        "cluster's CRD); default: %(default)s")
    p.add_argument("--name", type=_job_name, default=None,
                   help="the job's name, a DNS-1035 label (lower-case letters, digits and '-', "
                        "starting with a letter); default: the step's own, kfdist-<task name>-"
                        "<hash of run id and task name>, the same for every render with the same "
                        "--run-id and --task-name")
    add_step_flags(p)
    from kfdist.cli import add_image_flags

    add_image_flags(p)
    p.set_defaults(func=run_render)
    _add_render_launch(p, CUSTOMISATION_BY_RELEASE)
    return p


def _job_name(text: str) -> str:
    """`--name`'s type: a job name, else a usage error naming it."""
    from kfdist.components.train_distributed.kubernetes.build.job_validation import check_job_name

    try:
        check_job_name(text)
    except InvalidInputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _add_render_launch(p, releases) -> None:
    """`kfdist render launch [launch flags] -- COMMAND`: the job `kfdist launch` creates."""
    from kfdist.launch_cmd import add_launch_flags, render_launch

    sub = p.add_subparsers(dest="render_what", metavar="launch", required=False,
                           help="with `launch`: the job `kfdist launch` creates, not the step's")
    launch = sub.add_parser("launch", help="print the TFJob, PyTorchJob, MPIJob or TrainJob "
                                           "`kfdist launch` creates with the same flags",
                            description="Prints, as YAML, the job `kfdist launch` creates with "
                                        "the same flags, from its code path (its --dry-run).")
    add_launch_flags(launch)
    launch.add_argument("--trainer-version", default=max(releases), choices=sorted(releases),
                        help="Kubeflow Trainer release the TrainJob is for (launch reads it from "
                             "the cluster's CRD); default: %(default)s")
    launch.set_defaults(func=render_launch)


def render_from_args(args: argparse.Namespace):
    """Validates and renders the job the step would create; returns (body, job, layout, dataset_uri).

    Raises:
      InvalidInputError: Naming the first bad value, else every missing setting a cluster
        job needs (its backend, namespace and work location) at once.
    """
    from kfdist.components.train_distributed import runtime
    from kfdist.components.train_distributed.job import config
    from kfdist.components.train_distributed.kubernetes import backend
    from kfdist.components.train_distributed.kubernetes.build.render_trainjob import (
        CUSTOMISATION_BY_RELEASE)
    from kfdist.components.train_distributed.kubernetes.lifecycle.job_adoption import prepare_body
    from kfdist.step_flags import step_values

    values = step_values(args)
    dataset_uri = args.dataset_uri or (os.path.abspath(args.dataset) if args.dataset else None)
    step = runtime.build_job(**values)  # a bad value is named first
    _check_required(values, dataset_uri)
    if args.dataset:
        from kfdist.components.common.dataset_spec import load_metadata

        load_metadata(args.dataset)  # refuses a directory that is not a kfdist dataset
    job = config.JobConfig(dataset_dir=os.path.abspath(args.dataset or "dataset"),
                           model_dir="model", work_dir="reports", training=step.training,
                           job=step.spec)
    rendered, layout = backend.render_step_job(job, step.cluster, dataset_uri,
                                               CUSTOMISATION_BY_RELEASE[args.trainer_version],
                                               name=args.name)
    return prepare_body(rendered, owner=None), job, layout, dataset_uri


def _check_required(values: Dict[str, Any], dataset_uri: Optional[str]) -> None:
    """Refuses a render that lacks a cluster backend, the job's namespace or the replicas'
    shared location, naming every one that is missing in one message.

    Args:
      values: The step's parameters (`step_flags.step_values`).
      dataset_uri: Where the dataset is, if known.
    """
    from kfdist.components.train_distributed.job import strategy_rules
    from kfdist.components.train_distributed.kubernetes import backend
    from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

    problems = []
    if values["backend"] not in strategy_rules.CLUSTER_BACKENDS:
        problems.append(f"kfdist render prints a cluster job: pass --backend "
                        f"{' or '.join(strategy_rules.CLUSTER_BACKENDS)}, not "
                        f"{values['backend']!r}")
    options = ClusterOptions(**{name: values[name] for name in ("namespace", "work_uri", "pvc_name")
                                if values.get(name)})
    try:
        backend.job_place(options, dataset_uri, "job")
    except InvalidInputError as err:
        problems.append(str(err))
    require(not problems, "; ".join(problems))


def run_render(args: argparse.Namespace) -> int:
    """Handler of `kfdist render`: prints the job as YAML (after staging it with --stage); returns 0.

    Raises:
      InvalidInputError: On bad input (the `kfdist` CLI prints it and exits 2).
    """
    from kfdist.cli import image_target
    from kfdist.images import images_from

    registry, tag = image_target(args) or (None, None)
    with images_from(registry, tag):
        body, job, layout, dataset_uri = render_from_args(args)
        warning = _gpu_warning(args)
    if args.stage:
        from kfdist.components.train_distributed.kubernetes import backend

        remote = bool(dataset_uri) and storage.is_remote(dataset_uri)
        require(remote or bool(args.dataset),
                "--stage needs the dataset: pass --dataset DIR (a kfdist dataset) or a gs://, "
                "s3:// or minio:// --dataset-uri")
        backend.stage_job(job, layout, dataset_uri if remote else None)
        print(f"# staged {layout.job_file}", file=sys.stderr)
    else:
        print(f"# note: the job reads {layout.job_file}, which this render did not write: "
              "--stage writes it (with the dataset), as the training step does before it "
              "creates its job; applied before it is there, the replicas fail", file=sys.stderr)
    if warning:
        print(f"# warning: {warning}", file=sys.stderr)
    if args.name is None:
        sys.stdout.write(_default_name_comment(body["metadata"]["name"], args))
    sys.stdout.write(to_yaml(body, sort_keys=False, default_flow_style=False))
    return 0


def _gpu_warning(args: argparse.Namespace) -> Optional[str]:
    """The warning on --gpus-per-worker for replicas of kfdist's CPU image, else None."""
    from kfdist.components.train_distributed.kubernetes.options import ClusterOptions
    from kfdist.images import cpu_image_warning
    from kfdist.step_flags import spell

    replica_image = ClusterOptions(image=args.image or None).image_for(args.strategy)
    return cpu_image_warning(args.gpus_per_worker, replica_image, spell)


def _default_name_comment(name: str, args: argparse.Namespace) -> str:
    """The YAML comment saying where the default job name comes from."""
    from kfdist.components.train_distributed.kubernetes.backend import (
        DEFAULT_RUN_ID, DEFAULT_TASK_NAME)

    run_id, task = args.run_id or DEFAULT_RUN_ID, args.task_name or DEFAULT_TASK_NAME
    return (f"# name: {name}, the training step's own: kfdist-<task name>-<hash of run id and "
            f"task name>, from --run-id {run_id!r} and --task-name {task!r}\n"
            "# every render with those has this name, so applying another changes that job: "
            "pass --name NAME for a job of its own\n")


def main(argv: Optional[List[str]] = None) -> int:
    """Runs `render` alone (for tests and debugging): `python -m kfdist.render_cmd ...`."""
    from kfdist.cli_parser import CommandParser

    parser = CommandParser(prog="kfdist")
    add_render_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["render"] + list(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except InvalidInputError as err:
        from kfdist.flag_wording import flags_of, in_flag_terms

        print(f"kfdist: invalid input: {in_flag_terms(str(err), flags_of(parser.chosen(args)))}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
