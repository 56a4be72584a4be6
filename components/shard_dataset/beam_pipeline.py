"""`shard_dataset(runner="beam")`: the same dataset as the local writer, built by Apache Beam.

The driver (the shard step) opens and validates the source and decides the
split as the local path does; the Beam pipeline then reads the source's
units in parallel twice, as the local runner does (`beam_transforms`): a scan
computes what the local scan computes (split counts, classes, the train
split's column statistics, per-batch partials folded in reading order so the
figures are the local ones to the bit, and vocabularies; the string columns
that identify rows are decided before any record is written and not stored:
`categorical`), then a second read
writes balanced shards through run files, so records never pass through the
runner and the driver's memory does not grow with the data. The driver reads
that back, checks it like the local path, and publishes the dataset
(`metadata.json` last) the same way.

Locally the pipeline runs on Beam's FnApiRunner with one worker process per
core (`LOCAL_OPTIONS`); `beam_options` choose any other runner (Dataflow,
Flink, Spark) and its settings. Workers on other machines read and write
through `gs://` (`beam_remote`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
import tempfile
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from kfdist.components.common import storage
from kfdist.components.common.dataset_spec import LabelStatistics, ShardInfo, SplitInfo
from kfdist.components.common.label_numbers import LabelTally, split_statistics
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset import beam_remote
from kfdist.components.shard_dataset import beam_transforms as bt
from kfdist.components.common.dataset_spec import IDENTIFIER, ExcludedColumn
from kfdist.components.shard_dataset.categorical import VocabularyCounter, present_counts
from kfdist.components.shard_dataset.class_ids import renumbers
from kfdist.components.common.class_counts import sum_counts
from kfdist.components.shard_dataset.moments import RunningMoments
from kfdist.components.shard_dataset.scan import ScanResult

#: Beam on this machine: FnApiRunner (not DirectRunner, which first tries to download Prism),
#: one worker process per core.
LOCAL_OPTIONS = ("--runner=FnApiRunner", "--direct_running_mode=multi_processing",
                 "--direct_num_workers=0")
SUMMARY_FILE = "_beam_summary.json"


def pipeline_options(beam_options: Sequence[str]) -> List[str]:
    """`LOCAL_OPTIONS` overridden by `beam_options` (`--key=value` or `key=value` each).

    Raises:
      InvalidInputError: On an option that is not `key=value`.
    """
    given = []
    for option in beam_options:
        text = option if option.startswith("--") else "--" + option
        require("=" in text and len(text.split("=", 1)[0]) > 2,
                f"beam option {option!r} is not KEY=VALUE (e.g. runner=DataflowRunner)")
        given.append(text)
    keys = {text.split("=", 1)[0] for text in given}
    return [o for o in LOCAL_OPTIONS if o.split("=", 1)[0] not in keys] + given


def _summarize(_, written, scans, run_errors, plan, num_columns, num_strings) -> str:
    """One JSON document of what the pipeline wrote and learnt (read back by the driver)."""
    errors = [e["error"] for e in sorted((s for s in scans if "error" in s), key=lambda s: s["key"])]
    infos = sorted((s for s in scans if "error" not in s), key=lambda s: s["key"])
    counts = collections.Counter()
    per_class = {split: [] for split in bt.SPLIT_NAMES}
    tallies = {split: LabelTally() for split in bt.SPLIT_NAMES}
    moments = RunningMoments(num_columns) if num_columns is not None else None
    vocabulary = VocabularyCounter(num_strings)
    for info in infos:
        counts.update(info["counts"])
        for split in bt.SPLIT_NAMES:
            per_class[split] = sum_counts(per_class[split], info["class_counts"][split])
            if info.get("label_tallies"):
                tallies[split].merge(*info["label_tallies"][split])
        if moments is not None and info["moments"] is not None:
            moments.merge(*info["moments"])
        for column, counter in enumerate(info["values"] or ()):
            vocabulary.counts[column].update(counter)
    return json.dumps({
        "errors": (errors + sorted(run_errors))[:1],
        "shards": sorted(written, key=lambda s: s["path"]),
        "num_train": counts["train"], "num_eval": counts["eval"],
        "num_classes": max([i["max_label"] for i in infos], default=-1) + 1,
        "class_counts": per_class,
        "label_statistics": {split: dataclasses.asdict(stats)
                             for split, stats in split_statistics(tallies).items()},
        "mean": moments.mean.tolist() if moments is not None else None,
        "std": moments.std().tolist() if moments is not None else None,
        "value_counts": [sorted(c.items()) for c in vocabulary.counts],
        "identifiers": plan["identifiers"],
        "reader_processes": len({i["reader"] for i in infos}),
    })


def _build(pipeline, source, split_mask, root: str, num_shards: Dict[str, int], seed: int,
           compression, origins: Mapping[str, str], keep_columns: Sequence[str]):
    """Scan, plan, write runs, write shards, summarize (`beam_transforms` says why)."""
    import apache_beam as beam
    from apache_beam.pvalue import AsList, AsSingleton

    def units(label: str):
        return (pipeline | f"{label} units" >> beam.Create(list(range(len(source.units))))
                | f"spread {label}" >> beam.Reshuffle())

    scans = units("scan") | "scan" >> beam.FlatMap(beam_remote.on_unit, bt.scan_unit, source,
                                                   origins, split_mask)
    plan = (scans | "plan entries" >> beam.Map(bt.plan_entry) | beam.combiners.ToDict()
            | "plan" >> beam.Map(bt.plan_batches, list(source.feature.categorical_columns or ()),
                                 list(keep_columns), renumbers(source)))
    runs = units("write") | "write runs" >> beam.FlatMap(
        beam_remote.on_unit, bt.write_runs, source, origins, AsSingleton(plan), root, num_shards,
        seed)
    written = (runs | "runs" >> beam.Filter(lambda kv: kv[0] != bt.ERRORS)
               | "group" >> beam.GroupByKey()
               | "write" >> beam.Map(bt.write_shard, root, num_shards, compression))
    run_errors = (runs | "run errors" >> beam.Filter(lambda kv: kv[0] == bt.ERRORS)
                  | beam.Map(lambda kv: kv[1]))
    feature = source.feature
    num_columns = feature.shape[0] if len(feature.shape) == 1 and feature.dtype == "float32" \
        else None
    summary = functools.partial(_summarize, num_columns=num_columns,
                                num_strings=len(feature.categorical_columns or ()))
    (pipeline | "once" >> beam.Create([None])
     | "summarize" >> beam.Map(summary, AsList(written), AsList(scans), AsList(run_errors),
                               AsSingleton(plan))
     | "save" >> beam.Map(_save_summary, root))


def _save_summary(text: str, root: str) -> None:
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(FileSystems.join(root, SUMMARY_FILE)) as f:
        f.write(text.encode())


def _take_summary(root: str) -> dict:
    """Reads the pipeline's summary under `root` (a directory or a `gs://` prefix), deleting it."""
    path = storage.join(root, SUMMARY_FILE)
    if not storage.is_gcs(path):
        with open(path) as f:
            summary = json.load(f)
        os.remove(path)
        return summary
    with tempfile.TemporaryDirectory(prefix="kfdist-beam-") as scratch:
        with open(storage.download(path, os.path.join(scratch, SUMMARY_FILE))) as f:
            summary = json.load(f)
    storage.remove_tree(path)
    return summary


def run(source, split_mask, root: str, *, num_shards: Dict[str, int], seed: int, compression,
        beam_options: Sequence[str], log: Callable[[str], None],
        origins: Optional[Mapping[str, str]] = None, keep_columns: Sequence[str] = ()
        ) -> Tuple[ScanResult, Dict[str, SplitInfo]]:
    """Runs the Beam pipeline writing the shards under `root` (a directory or a `gs://` prefix).

    `origins` maps each local file of the staged source to its `gs://` object,
    for workers that do not share this machine's disk (`beam_remote`);
    `keep_columns` are string columns kept even if they identify rows.

    Returns:
      What the local scan would return (counts, classes, statistics,
      vocabularies), and the splits written (with class ids: `class_ids.renumbered`
      gives the scan's classes the ids the records hold).

    Raises:
      InvalidInputError: The first invalid input a worker met, in reading
        order (the message the local path gives).
    """
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    argv = pipeline_options(beam_options)
    log(f"beam: {len(source.units)} unit(s) to read, shards written under {root}; "
        f"options {' '.join(argv)}")
    with beam.Pipeline(options=PipelineOptions(argv)) as pipeline:
        _build(pipeline, source, split_mask, root, num_shards, seed, compression, origins or {},
               keep_columns)
    summary = _take_summary(root)
    storage.remove_tree(storage.join(root, bt.RUNS_DIR))
    if summary["errors"]:
        raise InvalidInputError(summary["errors"][0])
    log(f"beam: the source was read by {summary['reader_processes']} worker process(es)")
    return _scan_result(summary, source, log), _splits(summary)


def _scan_result(summary: dict, source, log: Callable[[str], None]) -> ScanResult:
    strings = source.feature.categorical_columns or ()
    vocabularies, identifiers = None, ()
    if strings:
        counter = VocabularyCounter(len(strings))
        for column, pairs in enumerate(summary["value_counts"]):
            counter.counts[column].update(dict(pairs))
        identifiers = tuple(  # the plan's decision: its shards lack these columns
            ExcludedColumn(name=name, reason=IDENTIFIER, distinct_values=len(present),
                           train_rows=sum(present.values()))
            for name, present in zip(strings, map(present_counts, counter.counts))
            if name in summary["identifiers"])
        vocabularies = counter.vocabularies(strings, log, summary["identifiers"]) or None
    as_tuple = (lambda v: tuple(float(x) for x in v) if v is not None else None)
    return ScanResult(num_train=summary["num_train"], num_eval=summary["num_eval"],
                      num_classes=summary["num_classes"], mean=as_tuple(summary["mean"]),
                      class_counts={k: tuple(v) for k, v in summary["class_counts"].items()},
                      std=as_tuple(summary["std"]), vocabularies=vocabularies,
                      identifiers=identifiers, label_statistics={
                          k: LabelStatistics(**v) for k, v in summary["label_statistics"].items()
                      } if source.is_regression else None)


def _splits(summary: dict) -> Dict[str, SplitInfo]:
    splits = {}
    for split in bt.SPLIT_NAMES:
        shards = tuple(ShardInfo(**s) for s in summary["shards"]
                       if s["path"].startswith(split + "/"))
        splits[split] = SplitInfo(num_examples=sum(s.num_examples for s in shards), shards=shards)
    return splits
