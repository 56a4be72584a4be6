"""results.md's tables of kfdist beside its peers (`python -m benchmarks --peers`)."""

from __future__ import annotations

from typing import Any, Dict, List

from benchmarks.common import markdown_table


def sharding_lines(m: Dict[str, Any]) -> List[str]:
    """Sharding plus statistics: kfdist local and Beam against ExampleGen + Transform analysis."""
    rows = [[name, f["wall_seconds"], f["peak_tree_rss_mb"], round(f["output_bytes"] / 1e6, 1)]
            for name, f in (("kfdist shard, local", m["kfdist_local"]),
                            (f"kfdist shard, Beam ({m['beam_workers']} workers)", m["kfdist_beam"]),
                            ("TFX CsvExampleGen + Transform analysis", m["tfx"]))]
    return [f"## Sharding plus statistics, {m['csv_bytes'] / 1e6:.0f} MB CSV, {m['rows']:,} rows",
            "", markdown_table(["contender", "seconds", "peak memory MB", "output MB"], rows), "",
            f"kfdist local is {m['kfdist_local_speedup_over_tfx']}x faster than the TFX pair in "
            f"{m['kfdist_local_memory_over_tfx']}x its memory."]


def _end_to_end_lines(m: Dict[str, Any], title: str, tfx_name: str) -> List[str]:
    """Both pipelines' totals, accuracy, blessing and raw-row answers; each step's seconds."""
    k, t = m["kfdist"], m["tfx"]
    steps = [[f"kfdist {name}", s] for name, s in k["seconds"].items()]
    steps += [[f"TFX {name}", s] for name, s in t["seconds"].items()]
    return [f"## {title} ({m['rows']['train']:,} train, {m['rows']['eval']:,} held-out rows)", "",
            markdown_table(["pipeline", "wall s", "held-out accuracy", "blessed",
                            "answers raw rows"],
                           [["kfdist run tabular", k["total_seconds"], k["accuracy"], k["blessed"],
                             k["answers_raw_rows"]],
                            [tfx_name, t["wall_seconds"], t["accuracy"], t["blessed"],
                             t["answers_raw_rows"]]]), "",
            markdown_table(["step", "seconds"], steps), "",
            f"kfdist is {m['kfdist_speedup_over_tfx']}x faster; the accuracies differ by "
            f"{m['accuracy_difference']} (one held-out row is {m['one_eval_row']})."]


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
    """Distributed overhead: kfdist's local backend against the plain script, per strategy."""
    rows = []
    for strategy in ("multi_worker_mirrored", "parameter_server"):
        row = m[strategy]
        for side in ("kfdist", "plain"):
            f = row[side]
            rows.append([strategy, side, f["steps_per_second"], f["examples_per_second"],
                         f["seconds_to_target"], f["val_accuracy"][-1], f["job_seconds"]])
    return [f"## Distributed overhead: kfdist against a plain TF_CONFIG script "
            f"({m['train_examples']:,} digits, {m['epochs']} epochs, batch "
            f"{m['batch_per_replica']} per replica)", "",
            markdown_table(["strategy", "side", "steps/s", "examples/s",
                            f"s to {m['target_accuracy']}", "final accuracy", "job s"], rows)]
