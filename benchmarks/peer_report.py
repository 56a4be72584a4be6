"""The tables of kfdist beside its peers (`python -m benchmarks --peers`), from `results.json`.

They go into `results.md` and, with the library paths and the targets they meet, into
`SNIPPET` (`results-peers.md`), the file the documentation includes, so no figure in it is
copied by hand. `python -m benchmarks.peer_report` writes the snippet again from
`results.json` alone, without measuring anything.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

from benchmarks.common import markdown_table
from benchmarks.repeats import show

#: The generated snippet the documentation includes, beside `results.json`.
SNIPPET = "results-peers.md"
#: The runner both Beam contenders use, and the peer's outputs, as the tables state them.
RUNNER = ("Beam's DirectRunner (its FnApiRunner, multi-processing) with 2 worker processes, on "
          "the machine its header names; TFX's production runner is Dataflow")


def in_current_layout(name: str, figures: Dict[str, Any]) -> bool:
    """Whether `figures` of measure `name` are in this version's layout: a peer measure kept
    from a run before rounds (one run per side, RSS memory, other clocks) is not."""
    return not name.startswith("peers_") or "rounds" in figures


def _rounds(m: Dict[str, Any]) -> str:
    return f"median (min to max) of {m['rounds']} alternating rounds"


def sharding_lines(m: Dict[str, Any]) -> List[str]:
    """Sharding plus statistics: kfdist local and Beam against ExampleGen + Transform analysis."""
    rows = [[name, show(f["pipeline_seconds"]), show(f["peak_tree_pss_mb"]),
             round(f["output_bytes"]["median"] / 1e6, 1)]
            for name, f in (("kfdist shard, local", m["kfdist_local"]),
                            (f"kfdist shard, Beam ({m['beam_workers']} workers)", m["kfdist_beam"]),
                            ("TFX CsvExampleGen + Transform analysis", m["tfx"]))]
    return [f"## Sharding plus statistics, {m['csv_bytes'] / 1e6:.0f} MB CSV, {m['rows']:,} rows",
            "", markdown_table(["contender", "pipeline s", "peak memory (PSS) MB", "output MB"],
                               rows), "",
            f"{_rounds(m)}. kfdist local is {show(m['kfdist_local_speedup_over_tfx'])}x faster "
            f"than the TFX pair in {show(m['kfdist_local_memory_over_tfx'])}x its memory; kfdist's "
            f"Beam runner, on the same runner as TFX, {show(m['kfdist_beam_speedup_over_tfx'])}x "
            f"faster in {show(m['kfdist_beam_memory_over_tfx'])}x its memory. Both Beam "
            f"contenders run on {RUNNER}. Outputs: kfdist's dataset (uncompressed TFRecord shards "
            "of `tf.Example`s, a `metadata.json` with the statistics); TFX's GZIP TFRecords of "
            "`tf.Example`s and Transform's graph. Every clock stops at the pipeline's end: the "
            "peer counts its output records after it." + rejected_runs(m)]


def rejected_runs(m: Dict[str, Any]) -> str:
    """The runs not counted because their output lacked rows of the table, by contender."""
    said = []
    for name in ("kfdist_local", "kfdist_beam", "tfx"):
        short = [r["examples"] for run in m[name]["runs"] for r in run.get("rejected_runs", ())]
        if short:
            said.append(f"{name} {len(short)} (" + ", ".join(f"{n:,}" for n in short) + " rows)")
    return (" Runs not counted because their output lacked rows of the table, each run again: "
            + "; ".join(said) + "." if said else "")


def one_row(rows: int) -> str:
    """What one of `rows` held-out rows weighs in an accuracy, in as many decimals as it takes
    (0.0145 for the penguins' 69, 0.000005 for 200,000)."""
    return f"{1 / rows:.6f}".rstrip("0") if rows > 100 else f"{1 / rows:.4f}"


def _end_to_end_lines(m: Dict[str, Any], title: str, tfx_name: str) -> List[str]:
    """Both pipelines' times, accuracy, blessing and raw-row answers; each step's median."""
    k, t = m["kfdist"], m["tfx"]
    steps = [[f"kfdist {name}", s] for name, s in k["median_step_seconds"].items()]
    steps += [[f"TFX {name}", s] for name, s in t["median_step_seconds"].items()]
    return [f"## {title} ({m['rows']['train']:,} train, {m['rows']['eval']:,} held-out rows)", "",
            markdown_table(["pipeline", "pipeline s", "held-out accuracy", "blessed",
                            "answers raw rows"],
                           [["kfdist run tabular", show(k["total_seconds"]), show(k["accuracy"]),
                             k["blessed"], k["answers_raw_rows"]],
                            [tfx_name, show(t["pipeline_seconds"]), show(t["accuracy"]),
                             t["blessed"], t["answers_raw_rows"]]]), "",
            markdown_table(["step (median)", "seconds"], steps), "",
            f"{_rounds(m)}. kfdist is {show(m['kfdist_speedup_over_tfx'])}x faster; the "
            f"accuracies differ by {show(m['accuracy_difference'])} (one held-out row is "
            f"{one_row(m['rows']['eval'])}). Both clocks run from the program's start to the "
            "pipeline's end (kfdist: its run; TFX: its Pusher); each side's raw-row check runs "
            f"after. TFX runs on {RUNNER}; it writes GZIP TFRecords of `tf.Example`s between its "
            "components and exports a SavedModel that takes serialized raw `tf.Example`s; "
            "kfdist writes uncompressed TFRecord shards and exports a SavedModel that takes the "
            "raw columns."]


def penguins_lines(m: Dict[str, Any]) -> List[str]:
    """End to end on the penguins: step times, accuracy, blessing, raw-row answers."""
    return _end_to_end_lines(m, "End to end on the penguins", "TFX penguin pipeline")


def at_size_lines(m: Dict[str, Any]) -> List[str]:
    """End to end at size: as the penguins, with the table's size and TFX's fixed costs."""
    s = m["settings"]
    lines = _end_to_end_lines(m, f"End to end at size, {m['table_rows']:,} rows, "
                                 f"{m['table_bytes'] / 1e6:.0f} MB CSV", "TFX's pipeline")
    lines[-1] += (f" Both: {s['epochs']} epochs, batch {s['batch_size']}, Adam "
                  f"{s['learning_rate']}, threshold {s['threshold']}; "
                  f"{', '.join(m['excluded'])} left out.")
    if m.get("tfx_fixed_share") is not None:
        lines[-1] += (f" TFX's fixed costs (its penguins run less its Trainer, "
                      f"{m['tfx_fixed_seconds']} s) are {m['tfx_fixed_share']:.0%} of its time.")
    return lines


def distributed_lines(m: Dict[str, Any]) -> List[str]:
    """Distributed overhead (matched settings) and defaults: kfdist against the plain script."""
    rows = []
    for strategy in ("multi_worker_mirrored", "parameter_server"):
        for pair in ("matched", "defaults"):
            row = m[strategy][pair]
            for side in ("kfdist", "plain"):
                f = row[side]
                rows.append([strategy, pair, side, row[f"{side}_steps_per_execution"],
                             row[f"{side}_input"], show(f["steps_per_second"]),
                             show(f["startup_seconds"]), show(f["exit_seconds"]),
                             show(f["seconds_to_target"]) if f["seconds_to_target"] else
                             "not reached", f["runs"][0]["val_accuracy"][-1]])
            rows.append([strategy, pair, "**kfdist / plain steps/s**", "", "",
                         show(row["kfdist_steps_per_second_over_plain"]), "", "", "", ""])
            if "plain_steps_per_second_over_plain_again" in row:
                rows.append([strategy, pair, "plain / plain again steps/s (the noise)", "", "",
                             show(row["plain_steps_per_second_over_plain_again"]), "", "", "",
                             ""])
    return [f"## Distributed: kfdist against a plain TF_CONFIG script ({m['train_examples']:,} "
            f"digits, {m['epochs']} epochs, batch {m['batch_per_replica']} per replica)", "",
            markdown_table(["strategy", "pair", "side", "steps per call", "input", "steps/s",
                            "start-up s", "exit s", f"s to {m['target_accuracy']}",
                            "final accuracy (round 1)"], rows), "",
            f"{_rounds(m)}. `matched` is the overhead: the same steps per call and the same input "
            "(the training step's own input function, the split decoded once into memory). "
            "`defaults` is kfdist as it ships against the script as TensorFlow's tutorials "
            "write it (every batch parsed from the TFRecords). Steps/s: the epochs after the "
            "first, training only. Start-up: the job's start to its first step; exit: the last "
            "epoch's end to the job's end. `plain / plain again`: the plain script against a "
            "second run of itself in the same rounds, the spread this machine's noise alone "
            "gives a ratio (1.0 on a quiet machine)."]


#: (measure, renderer) of the peer sections, in the order the reports show them.
SECTIONS = (("peers_sharding", sharding_lines), ("peers_penguins", penguins_lines),
            ("peers_distributed", distributed_lines), ("peers_at_size", at_size_lines))
#: The measures the snippet shows: a run that measured none of them leaves it alone.
SNIPPET_MEASURES = ("library_paths", *(name for name, _ in SECTIONS))


def snippet(result: Dict[str, Any]) -> str:
    """The documentation's snippet: the peer measures' and library paths' provenance, targets
    and tables, from `results.json`'s `result`."""
    from benchmarks import report

    names = set(SNIPPET_MEASURES)
    picked = dict(result, headers={n: h for n, h in result.get("headers", {}).items()
                                   if n in names},
                  targets=[r for r in result.get("targets", []) if r["measure"] in names])
    lines = ["<!-- generated by `python -m benchmarks` from benchmarks/results.json; "
             "do not edit -->", "", report.headers_table(picked), "", report.targets_table(picked)]
    measures = result["measures"]
    for name, render in (("library_paths", report.library_paths_lines), *SECTIONS):
        if name in measures:
            lines += [""] + report.section(name, render, measures[name])
    return "\n".join(lines) + "\n"


def snippet_of_file(path: str) -> str:
    """The snippet of the `results.json` at `path`, its targets judged and its headers read as
    this version does (a file written before per-measure headers gives them without commits)."""
    from benchmarks import provenance
    from benchmarks.__main__ import target_rows

    with open(path) as f:
        result = json.load(f)
    result.update(headers=provenance.headers_of(result),
                  targets=target_rows(result["measures"]))
    return snippet(result)


if __name__ == "__main__":  # python -m benchmarks.peer_report [RESULTS_JSON]: the snippet again
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.json")
    text = snippet_of_file(path)
    with open(os.path.join(os.path.dirname(path), SNIPPET), "w") as f:
        f.write(text)
