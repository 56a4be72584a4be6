"""`results.md`: the machine, the targets, then each measure's main figures as tables."""

from __future__ import annotations

from typing import Any, Dict, List

from benchmarks.common import markdown_table


def _sharding_rows(name: str, figures: Dict[str, Any], examples: int) -> List[List[Any]]:
    rows = []
    for runner in ("local", "beam", "naive_writer"):
        r = figures[runner]
        memory = f"{r['peak_rss_mb']:,}"
        if "largest_worker_rss_mb" in r:
            memory += f" (+ {figures['beam_workers']} workers, largest {r['largest_worker_rss_mb']:,})"
        rows.append([name, f"{examples:,}", runner.replace("_", " "), r["seconds"],
                     f"{r['examples_per_second']:,}", r["mb_per_second"], memory])
    rows.append([name, f"{examples:,}", "byte-copy limit", figures["copy_limit"]["seconds"], "",
                 figures["copy_limit"]["mb_per_second"], ""])
    return rows


def sharding_tables(m: Dict[str, Any]) -> List[str]:
    """Throughput and memory per runner and input, then the local runner's profiles."""
    mnist, csv = m["mnist"], m["csv"]
    header = ["input", "examples", "writer", "seconds", "examples/s", "output MB/s", "peak RSS MB"]
    rows = []
    for tag in ("1x", "10x"):
        rows += _sharding_rows(f"MNIST {tag}", mnist[tag], mnist[tag]["local"]["examples"])
    rows += _sharding_rows(f"CSV {csv['csv_bytes'] / 1e9:.2f} GB, {csv['csv_files']} files", csv,
                           csv["local"]["examples"])
    stages = list(mnist["local_profile"]["stages"])
    profile = markdown_table(["local runner's time (cProfile)", "MNIST 1x", "CSV"], [
        [stage, f"{mnist['local_profile']['stages'][stage]:.0%}",
         f"{csv['local_profile']['stages'][stage]:.0%}"] for stage in stages])
    return ["## Sharding", "", markdown_table(header, rows), "", profile]


def end_to_end_lines(m: Dict[str, Any]) -> List[str]:
    """kfdist run mnist against the plain script."""
    steps = ", ".join(f"{k} {v}" for k, v in m["kfdist_steps"].items())
    return ["## End to end", "",
            f"- `kfdist run mnist --workers 1 --strategy {m['strategy']} --epochs {m['epochs']}` on {m['train_examples']:,} + "
            f"{m['eval_examples']:,} digits: {m['kfdist_seconds']} s ({steps}), held-out "
            f"{m['kfdist_accuracy']}",
            f"- plain Keras script: {m['plain_script_seconds']} s, held-out {m['plain_accuracy']}; "
            f"its one-off AutoGraph cost (first epoch over the others): "
            f"{m['plain_one_off_autograph_seconds']} s; `fit` returned "
            f"{m['plain_fit_return_seconds']} s after its last epoch",
            f"- epoch seconds (training and validation): kfdist "
            f"{', '.join(str(e) for e in m['kfdist_epoch_seconds'])}; plain script "
            f"{', '.join(str(e) for e in m['plain_epoch_seconds'])}",
            f"- ratio {m['kfdist_over_plain']}x ({m['kfdist_over_plain_without_fit_return']}x "
            f"against the plain script without the wait for `fit` to return, "
            f"{m['kfdist_over_plain_without_autograph']}x without its one-off AutoGraph cost)"]


def time_to_accuracy_lines(m: Dict[str, Any]) -> List[str]:
    """Per strategy: time to the target, start-up, examples/s, the validation curve."""
    rows = [[r["strategy"] + (" (the end-to-end run's training step)"
                              if r.get("from_end_to_end") else ""), r.get("workers"),
             r["seconds_to_target"] or "not reached",
             r["epochs_to_target"] or "", r["startup_seconds"], f"{r['examples_per_second']:,}",
             " ".join(str(v) for v in r["val_accuracy"])] for r in m["strategies"]]
    return [f"## Time to {m['target_accuracy']} held-out accuracy "
            f"({m['train_examples']:,} training digits, at most {m['max_epochs']} epoch(s))", "",
            markdown_table(["strategy", "workers", "seconds to target", "epochs", "start-up s",
                            "examples/s", "val_accuracy per epoch"], rows)]


def library_paths_lines(m: Dict[str, Any]) -> List[str]:
    """kfdist's hand-written encoder, framing and CSV reader against the library paths."""
    enc, frm, csv, imp = m["encoding"], m["framing"], m["csv"], m["import_seconds"]
    col, bat = m.get("columns"), m.get("batched_encoding")
    rows = [
        [f"Example encoding, {enc['examples']:,} MNIST images", enc["seconds"]["images_kfdist"],
         "tf.train.Example", enc["seconds"]["images_proto"], enc["images_kfdist_over_proto"]],
        [f"Example encoding, {enc['examples']:,} table rows", enc["seconds"]["rows_kfdist"],
         "tf.train.Example", enc["seconds"]["rows_proto"], enc["rows_kfdist_over_proto"]],
    ] + ([[f"Example encoding, {bat['examples']:,} table rows, {bat['distinct_strings']:,} "
           f"distinct values per string column", bat["seconds"]["kfdist"], "tf.train.Example",
           bat["seconds"]["proto"], bat["kfdist_over_proto"]],
          ["the same rows", bat["seconds"]["kfdist"],
           "tfx_bsl RecordBatchToExamplesEncoder (Arrow batches)", bat["seconds"]["tfx_bsl"],
           bat["kfdist_over_tfx_bsl"]]] if bat else []) + [
        [f"TFRecord framing + SHA-256, {frm['megabytes']} MB", frm["none"]["seconds"]["kfdist"],
         "tf.io.TFRecordWriter", frm["none"]["seconds"]["tf"], frm["none"]["kfdist_over_tf"]],
        ["the same, GZIP (" + ("the same bytes as TensorFlow's; " if frm["gzip"].get("same_bytes")
                              else "") + "zlib's cost on both sides: parity expected)",
         frm["gzip"]["seconds"]["kfdist"],
         "tf.io.TFRecordWriter", frm["gzip"]["seconds"]["tf"], frm["gzip"]["kfdist_over_tf"]],
    ] + ([[f"2 columns + labels of {col['examples']:,} table-row Examples (no TF)",
           col["seconds"]["kfdist"], "tf.data + tf.io.parse_example", col["seconds"]["tf"],
           col["kfdist_over_tf"]]] if col else []) + [
        [f"CSV to arrays, {csv['megabytes']} MB (kfdist: read pass)",
         csv["seconds"]["kfdist_read_pass"], "pyarrow.csv.open_csv",
         csv["seconds"]["pyarrow_open_csv"], csv["kfdist_read_over_pyarrow"]],
        [f"CSV to arrays, {csv['megabytes']} MB (kfdist: read pass)",
         csv["seconds"]["kfdist_read_pass"], "pandas read_csv chunks",
         csv["seconds"]["pandas_chunks"], csv["kfdist_read_over_pandas"]],
        [f"CSV profile + read, {csv['megabytes']} MB", csv["seconds"]["kfdist"],
         "csv module (kfdist's fallback)", csv["seconds"]["kfdist_csv_module"],
         csv["kfdist_over_csv_module"]],
        ["import (fresh interpreter)", imp["numpy_crc32c_pyarrow"], "import tensorflow",
         imp["tensorflow"], round(imp["tensorflow"] / imp["numpy_crc32c_pyarrow"], 1)],
    ]
    return ["## Hand-written parts against the library path (best of 3, seconds)", "",
            markdown_table(["what", "kfdist s", "library path", "library s",
                            "kfdist speed-up"], rows)]


def headers_table(result: Dict[str, Any]) -> str:
    """Each measure's commit, date, command and machine (`provenance`); the date of a measure
    completed from a stopped run's journal spans its first run to its end."""
    rows = []
    for name, h in result.get("headers", {}).items():
        m = h.get("machine") or {}
        commit = h.get("commit")
        rows.append([name, f"`{commit[:12]}{'+dirty' * commit.endswith('+dirty')}`"
                     if commit else "not recorded",
                     f"{h['first_run']} to {h.get('date')}" if h.get("first_run") else h.get("date"),
                     f"`{h['command']}`" if h.get("command") else "not recorded",
                     f"{m.get('cpus')} CPUs ({m.get('cpu_model')}), {m.get('memory_gib')} GiB"
                     if m else ""])
    return markdown_table(["measure", "commit", "date", "command", "machine"], rows)


def targets_table(result: Dict[str, Any]) -> str:
    """The targets, each value as measured (a spread as median and range) and whether met."""
    from benchmarks.repeats import show

    return markdown_table(["measure", "figure", "value", "target", "met"], [
        [r["measure"], r["figure"],
         show(r["value"]) if r["value"] is not None else "older layout: measure again",
         r["target"], "yes" if r["met"] else "**no**" if r["value"] is not None else "unknown"]
        for r in result["targets"]])


def section(name: str, render, figures: Dict[str, Any]) -> List[str]:
    """A measure's section; a measure kept from a run in an older layout says so instead."""
    from benchmarks.peer_report import in_current_layout

    try:
        if in_current_layout(name, figures):
            return render(figures)
    except (KeyError, TypeError):
        pass
    return [f"## {name}", "", f"Kept from a run in an older layout: run "
                f"`python -m benchmarks --only {name}` to measure it again."]


def markdown(result: Dict[str, Any]) -> str:
    """results.md: where each measure comes from, the targets, then the main figures."""
    lines = [f"# kfdist benchmarks ({result['mode']})", "",
             f"Last run: `{result['command']}`, {result['date']}, {result['seconds']} s.", "",
             headers_table(result), "", targets_table(result)]
    measures = result["measures"]
    from benchmarks import kfp_backend, peer_report

    for name, render in (("sharding", sharding_tables), ("end_to_end", end_to_end_lines),
                         ("time_to_accuracy", time_to_accuracy_lines),
                         ("library_paths", library_paths_lines),
                         ("kfp_backend", kfp_backend.report_lines),
                         *peer_report.SECTIONS):
        if name in measures:
            lines += [""] + section(name, render, measures[name])
    lines += ["", "Raw figures (baselines beside kfdist) are in `results.json`."]
    return "\n".join(lines) + "\n"
