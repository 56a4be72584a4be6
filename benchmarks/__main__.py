"""Runs every kfdist benchmark, prints the table, writes results.json and results.md.

    python -m benchmarks            # real sizes: 70k/700k digits, a 1 GB CSV, 60k-digit runs
    python -m benchmarks --quick    # small inputs, no polling runs, fewer measures: under 2 minutes
    python -m benchmarks --peers    # kfdist beside TFX's component libraries (their own venv)
    python -m benchmarks --only kfp_backend [--kfp-bed DIR]   # a pipeline on KFP's backend

A quick run writes files of its own (results-quick.json, results-quick.md); any run keeps
the measures it did not make as the earlier results hold them (`results_files`).

Every figure is measured in the same run as its baseline and reported as a
ratio, because shared machines are noisy; see each module for what is compared.
The peer pairs run `--rounds` times, alternating sides, and are reported as median
and spread (`repeats`). results.json records, for each measure, the commit,
command, date and machine it was measured with (`provenance`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmarks import (end_to_end, input_pipeline, journal, kfp_backend, launcher,
                        library_paths, peer_at_size, peer_distributed, peer_end_to_end, peer_report,
                        peer_sharding, provenance, repeats, results_files, sharding,
                        time_to_accuracy, training)
from benchmarks.common import write_synthetic_mnist

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    "full": dict(mnist_examples=70_000, csv_bytes=10 ** 9, dataset_examples=10_000, train_epochs=2,
                 launcher_jobs=5, polls=(15.0,), e2e_train_examples=60_000, e2e_epochs=6,
                 tta_epochs=1, tta_target=0.96, library_examples=70_000,
                 library_csv_bytes=200 * 10 ** 6, peer_csv_bytes=10 ** 9, peer_epochs=4,
                 peer_size_rows=1_000_000),
    "quick": dict(mnist_examples=3_000, csv_bytes=5 * 10 ** 6, dataset_examples=3_000,
                  train_epochs=2, launcher_jobs=2, polls=(), e2e_train_examples=3_000,
                  e2e_epochs=2, tta_epochs=1, tta_target=0.5, library_examples=5_000,
                  library_csv_bytes=5 * 10 ** 6, peer_csv_bytes=5 * 10 ** 6, peer_epochs=2,
                  peer_size_rows=3_000),
}
MEASURES = ("sharding", "input_pipeline", "training", "launcher", "end_to_end", "time_to_accuracy",
            "library_paths")
#: kfdist beside its peers (`--peers`): TFX's component libraries, installed on first use, and
#: the library paths (tfx_bsl's encoder among them).
PEER_MEASURES = ("library_paths", "peers_sharding", "peers_penguins", "peers_distributed",
                 "peers_at_size")
#: `--quick` leaves out the measures whose small-size figures are only start-up times.
QUICK_MEASURES = ("sharding", "input_pipeline", "launcher", "end_to_end")
#: Measures run only when named (`--only`): they need the genuine node's bed with KFP.
OPT_IN_MEASURES = ("kfp_backend",)

#: (measure, figure, how to read it, target test, target text)
TARGETS: List[Tuple[str, str, Callable[[Dict[str, Any]], Any], Callable[[Any], bool], str]] = [
    ("sharding", "local runner, MNIST 1x: fraction of the byte-copy limit",
     lambda m: m["mnist"]["1x"]["local_fraction_of_copy_limit"], lambda v: v >= 0.85,
     ">= 0.85 (else the profile shows why)"),
    ("sharding", "local runner peak memory, MNIST 10x / 1x",
     lambda m: m["mnist"]["local_peak_memory_10x_over_1x"], lambda v: v <= 1.25, "flat (<= 1.25)"),
    ("input_pipeline", "steady state vs in-memory limit", lambda m: m["steady_vs_limit"], lambda v: v >= 0.8, ">= 0.8x"),
    ("input_pipeline", "first epoch vs naive", lambda m: m["first_epoch_vs_naive"], lambda v: v >= 1.5, ">= 1.5x"),
    ("training", "1-worker steps/s vs plain Keras", lambda m: m["one_worker_vs_plain"], lambda v: v >= 0.9, ">= 0.9x"),
    ("training", "input-bound fraction (1 worker)", lambda m: m["kfdist_1_worker"]["input_bound_fraction"], lambda v: v is not None and v <= 0.05, "<= 5 %"),
    ("launcher", "reaction to terminal condition (s)", lambda m: m["kfdist"]["reaction_seconds_max"], lambda v: v <= 1.0, "<= 1 s"),
    ("end_to_end", "kfdist run mnist vs plain script (no credit for a slow `fit` return)",
     lambda m: m["kfdist_over_plain_without_fit_return"], lambda v: v <= 1.3, "<= 1.3x"),
    ("peers_sharding", "sharding + statistics: kfdist local speed-up over TFX ExampleGen + "
     "Transform analysis", lambda m: m["kfdist_local_speedup_over_tfx"], lambda v: v >= 2,
     ">= 2x"),
    ("peers_sharding", "sharding + statistics: kfdist local memory (PSS) / TFX's",
     lambda m: m["kfdist_local_memory_over_tfx"], lambda v: v < 1, "< 1"),
    ("peers_sharding", "sharding + statistics: kfdist Beam speed-up over TFX (same runner)",
     lambda m: m["kfdist_beam_speedup_over_tfx"], lambda v: v >= 2, ">= 2x"),
    ("peers_sharding", "sharding + statistics: kfdist Beam memory (PSS) / TFX's (same runner)",
     lambda m: m["kfdist_beam_memory_over_tfx"], lambda v: v < 1, "< 1"),
    ("peers_penguins", "penguins end to end: kfdist speed-up over TFX's pipeline",
     lambda m: m["kfdist_speedup_over_tfx"], lambda v: v >= 2, ">= 2x"),
    ("peers_distributed", "overhead, multi_worker_mirrored (2 workers), matched settings: "
     "kfdist steps/s over the plain script's",
     lambda m: m["multi_worker_mirrored"]["matched"]["kfdist_steps_per_second_over_plain"],
     lambda v: v >= 0.95, ">= 0.95x"),
    ("peers_distributed", "overhead, parameter_server (1 ps, 2 workers), matched settings: "
     "kfdist steps/s over the plain script's",
     lambda m: m["parameter_server"]["matched"]["kfdist_steps_per_second_over_plain"],
     lambda v: v >= 0.95, ">= 0.95x"),
    ("peers_penguins", "penguins: held-out accuracy, kfdist - TFX",
     lambda m: m["accuracy_difference"], lambda v: abs(v) <= 0.01,
     "within 0.01 (one held-out row: 0.0145)"),
    ("peers_at_size", "end to end at size: kfdist speed-up over TFX's pipeline",
     lambda m: m["kfdist_speedup_over_tfx"], lambda v: v >= 2, ">= 2x"),
    ("peers_at_size", "at size: held-out accuracy, kfdist - TFX",
     lambda m: m["accuracy_difference"], lambda v: abs(v) <= 0.01, "within 0.01"),
]


def run(mode: str, only: List[str], log: Callable[[str], None],
        kubeconfig: Optional[str] = None, rounds: int = repeats.REPEATS,
        finished: Callable[[str], None] = lambda name: None,
        runs: Optional[journal.Journal] = None, kfp_bed: Optional[str] = None) -> Dict[str, Any]:
    """Runs the selected measures at `mode`'s sizes; returns them by name.

    Args:
      mode: `full` or `quick` (`SIZES`).
      only: The measures to run.
      log: Receives progress lines.
      kubeconfig: The cluster of the launcher measure; None: the project's test bed.
      rounds: Rounds of every peer pair (`repeats`) and of `kfp_backend`.
      kfp_bed: The bed of the kfp_backend measure; None: one started for it.
      finished: Called with each measure's name as it ends.
      runs: Keeps the peer pairs' runs as they end, and gives back those it holds (`journal`).
    """
    size = SIZES[mode]
    measures: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-") as root:
        dataset = digits = None
        if {"end_to_end", "time_to_accuracy", "peers_distributed"} & set(only):
            digits = end_to_end.write_mnist_like(root, size["e2e_train_examples"])
        if {"input_pipeline", "training"} & set(only):
            from kfdist.components.shard_dataset.runtime import shard

            raw = os.path.join(root, "raw")
            write_synthetic_mnist(raw, size["dataset_examples"], seed=7)
            dataset = os.path.join(root, "dataset")
            shard(raw, dataset, source_format="mnist_idx", num_shards=8, log=lambda line: None)
        steps = [
            ("sharding", lambda: sharding.measure(size["mnist_examples"], size["csv_bytes"], log)),
            ("input_pipeline", lambda: input_pipeline.measure(dataset)),
            ("training", lambda: training.measure(dataset, size["train_epochs"])),
            ("launcher", lambda: launcher.measure(size["launcher_jobs"], size["polls"],
                                                         kubeconfig)),
            ("end_to_end", lambda: end_to_end.measure(digits, size["e2e_train_examples"],
                                                      size["e2e_epochs"])),
            ("time_to_accuracy", lambda: time_to_accuracy.measure(
                digits, size["e2e_train_examples"], size["tta_epochs"], size["tta_target"],
                measures.get("end_to_end"))),
            ("library_paths", lambda: library_paths.measure(
                size["library_examples"], size["library_csv_bytes"], log)),
            ("peers_sharding", lambda: peer_sharding.measure(size["peer_csv_bytes"], root, log,
                                                             rounds)),
            ("peers_penguins", lambda: peer_end_to_end.measure_penguins(root, log, rounds)),
            ("peers_distributed", lambda: peer_distributed.measure(
                digits, size["e2e_train_examples"], size["peer_epochs"], size["tta_target"], log,
                rounds)),
            ("peers_at_size", lambda: peer_at_size.measure(
                size["peer_size_rows"], root, log, measures.get("peers_penguins"), rounds)),
            ("kfp_backend", lambda: kfp_backend.measure(rounds, kfp_bed, log)),
        ]
        for name, fn in steps:
            if name not in only:
                continue
            started = time.perf_counter()
            log(f"benchmark {name} ...")
            with (journal.recording(runs, name) if runs else contextlib.nullcontext()):
                measures[name] = fn()
            finished(name)
            log(f"benchmark {name}: {time.perf_counter() - started:.0f} s")
    return measures


def target_rows(measures: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Each target with its measured value and whether it is met: a value measured in rounds is
    a spread (median, min, max), met only when the whole spread meets the target. A measure kept
    in an older layout that lacks the figure gives the row the value None, not met."""
    rows = []
    for measure, figure, read, ok, text in TARGETS:
        if measure not in measures:
            continue
        try:
            value = (read(measures[measure])
                     if peer_report.in_current_layout(measure, measures[measure]) else None)
        except (KeyError, TypeError):
            value = None
        rows.append({"measure": measure, "figure": figure, "value": value, "target": text,
                     "met": repeats.met(value, ok)})
    return rows


def _parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"small sizes, measures {', '.join(QUICK_MEASURES)} (under 2 minutes)")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated measures to run (default: {', '.join(MEASURES)})")
    parser.add_argument("--peers", action="store_true",
                        help=f"measure kfdist beside TFX's component libraries "
                             f"({', '.join(PEER_MEASURES)}); installs them into their own "
                             "environment first")
    parser.add_argument("--rounds", type=int, default=repeats.REPEATS,
                        help=f"rounds of every peer pair, sides alternating (default "
                             f"{repeats.REPEATS}; a figure measured fewer than "
                             f"{repeats.REPEATS} times is a smoke test)")
    parser.add_argument("--resume", action="store_true",
                        help="continue a run that was stopped: take the runs its journal "
                             f"({journal.FILE.format(mode='full')} in --out-dir) kept, make the "
                             "rest (same code, mode and machine only)")
    parser.add_argument("--out-dir", default=HERE,
                        help="where results.json and results.md go (a --quick run's: "
                             "results-quick.json and results-quick.md)")
    parser.add_argument("--kubeconfig", default=None,
                        help="cluster of the launcher measure (the Training Operator installed, "
                             "kfdist's runtime image pullable, jobs go to `default`); default: "
                             "the project's test bed (tests/cluster), started for the run")
    parser.add_argument("--kfp-bed", default=None, metavar="DIR",
                        help="the bed of the kfp_backend measure, started with `bash "
                             "tests/cluster/up.sh DIR --stack node --with-kfp`; default: one "
                             "started for the run")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    mode = "quick" if args.quick else "full"
    chosen = args.only or ",".join(PEER_MEASURES if args.peers
                                   else QUICK_MEASURES if args.quick else MEASURES)
    only = [name.strip() for name in chosen.split(",") if name.strip()]
    unknown = [name for name in only if name not in MEASURES + PEER_MEASURES + OPT_IN_MEASURES]
    problem = (f"--only {','.join(unknown)}: not a measure; valid: "
               f"{', '.join(dict.fromkeys(MEASURES + PEER_MEASURES + OPT_IN_MEASURES))}"
               if unknown else
               f"--rounds {args.rounds}: must be at least 1" if args.rounds < 1 else
               f"--kfp-bed {args.kfp_bed}: no bed with Kubeflow Pipelines there (no kfp-host); "
               f"start one with `bash tests/cluster/up.sh {args.kfp_bed} --stack node --with-kfp`"
               if args.kfp_bed and not os.path.isfile(os.path.join(args.kfp_bed, "kfp-host"))
               else None)
    if problem:
        print(f"python -m benchmarks: {problem}", file=sys.stderr)
        return 2
    try:
        runs = journal.open_journal(args.out_dir, mode, args.resume)
    except journal.JournalError as error:
        print(f"python -m benchmarks: {error}", file=sys.stderr)
        return 2
    command = " ".join(["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])])
    start_header = provenance.header(command)  # the checkout as the run starts
    started = time.perf_counter()
    headers: Dict[str, Dict[str, Any]] = {}

    def finished(name: str) -> None:
        headers[name] = dict(start_header, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        resumed = runs.earliest(name)
        if resumed and resumed < start_header["date"]:  # runs of an earlier, stopped invocation
            headers[name]["first_run"] = resumed

    os.makedirs(args.out_dir, exist_ok=True)
    measures = run(mode, only, lambda line: print(line, file=sys.stderr, flush=True),
                   args.kubeconfig, args.rounds, finished, runs, args.kfp_bed)
    result = {"mode": mode, **start_header, "seconds": round(time.perf_counter() - started),
              "measures": dict(measures), "headers": headers}
    text = results_files.write_results(result, args.out_dir)
    runs.forget(measures)  # their runs are in results.json now
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
