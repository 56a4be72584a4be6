"""The shard step's data check: a table's statistics, and the new data against its reference.

`DataCheck` rides along the shard step's passes (`observe_scan`,
`observe_write`), or reads the source itself after a Beam run (`read`).
After the scan, `judge` compares the data with the reference
(`validation.compare`, and the label's classes: `label_check`): each
anomaly is logged on a line of its own and fails the step
(`DataAnomalyError`, before a shard is written; it carries the HTML page)
unless `allow_anomalies`; drift is logged as a warning. `write` puts
`statistics.json`, `validation.json` (the comparison) and the HTML page
(`validation_report`) into the dataset directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Callable, Mapping, Optional, Sequence

from kfdist.components.common.class_counts import label_record
from kfdist.components.common.dataset_spec import DatasetMetadata
from kfdist.components.common.dataset_statistics import (
    NUMERIC, DatasetStatistics, load_statistics, write_statistics)
from kfdist.components.shard_dataset import validation
from kfdist.components.shard_dataset.column_report import explain_columns
from kfdist.components.shard_dataset.label_check import label_anomalies, task_anomalies
from kfdist.components.shard_dataset.reference import Reference
from kfdist.components.shard_dataset.source import ExampleBatch, Source
from kfdist.components.shard_dataset.statistics import StatisticsCollector, describes
from kfdist.components.shard_dataset.validation_report import REPORT_FILE, render_validation_html

VALIDATION_FILE = "validation.json"


@dataclasses.dataclass(frozen=True)
class CheckOptions:
    """How new data is judged against its reference.

    Attributes:
      allow_anomalies: Go on despite anomalies (they are still logged and recorded).
      categorical_drift_threshold: L-infinity distance above which a string column drifted.
      numeric_drift_threshold: Jensen-Shannon divergence above which a numeric column drifted.
    """

    allow_anomalies: bool = False
    categorical_drift_threshold: float = validation.CATEGORICAL_DRIFT_THRESHOLD
    numeric_drift_threshold: float = validation.NUMERIC_DRIFT_THRESHOLD


def _count(items: Sequence, noun: str) -> str:
    return f"{len(items)} {noun if len(items) == 1 else noun[:-1] + 'ies'}"


class DataCheck:
    """Statistics and validation of one source (see the module docstring).

    Args:
      source: The opened source (its feature decides whether it is a table; its task is
        compared with the reference's).
      reference: What to compare with; None: describe only.
      options: The thresholds and whether anomalies fail the step.
      excluded: Columns the user left out of this dataset.
      label_column: The label's column, in messages.
    """

    def __init__(self, source: Source, reference: Optional[Reference], options: CheckOptions,
                 excluded: Sequence[str] = (), label_column: Optional[str] = None):
        self.reference = reference
        self.label_column = label_column
        self.task = source.task
        self.options = options
        self.excluded = tuple(excluded)
        self.result: Optional[validation.ValidationResult] = None
        self.collector: Optional[StatisticsCollector] = None
        if describes(source.feature):
            edges = {c.name: c.histogram_edges for c in reference.statistics.columns
                     if c.kind == NUMERIC} if reference else {}
            self.collector = StatisticsCollector(source.feature, edges)

    def observe_scan(self, batch: ExampleBatch) -> None:
        """Takes a batch of the scan pass."""
        if self.collector is not None:
            self.collector.observe(batch)

    def observe_write(self, batch: ExampleBatch) -> None:
        """Takes a batch of the writing pass."""
        if self.collector is not None:
            self.collector.observe_histograms(batch)

    def read(self, source: Source) -> None:
        """Both passes over `source` here (after a Beam run, which computes no statistics)."""
        if self.collector is None:
            return
        for batch in source.batches():
            self.collector.observe(batch)
        for batch in source.batches():
            self.collector.observe_histograms(batch)

    def judge(self, identifiers: Sequence[str], log: Callable[[str], None],
              classes: Optional[Mapping[str, int]]) -> None:
        """Compares the scanned data with the reference, logging every anomaly and drift.

        Args:
          identifiers: The string columns that identify rows.
          log: Receives the verdict's lines.
          classes: The label's classes and their examples (`label_check.scanned_classes`);
            None: the label is not compared.

        Raises:
          DataAnomalyError: If there is an anomaly and anomalies are not allowed.
        """
        if self.collector is None or self.reference is None:
            return
        statistics = self.collector.finish(identifiers)
        result = validation.compare(
            self.reference.statistics, statistics,
            reference_name=self.reference.name,
            binned_at_reference=self.collector.binned_at_reference(), excluded=self.excluded,
            reference_excluded=self.reference.excluded,
            categorical_threshold=self.options.categorical_drift_threshold,
            numeric_threshold=self.options.numeric_drift_threshold)
        labels = task_anomalies(self.reference.task, self.task, self.label_column)
        if not labels and classes is not None and self.reference.classes is not None:
            labels = label_anomalies(self.reference.classes, classes, self.label_column)
        result = dataclasses.replace(result, anomalies=tuple(labels) + result.anomalies)
        self.result = result
        log(f"data validation against {result.reference}: {_count(result.anomalies, 'anomaly')}"
            f", {len(result.drifted)} of {len(result.drifts)} compared columns drifted")
        for anomaly in result.anomalies:
            log(f"anomaly: {anomaly.message}")
        for drift in result.drifted:
            log(f"warning: drift: {drift.describe()}")
        for note in result.notes:
            log(note)
        if result.anomalies and not self.options.allow_anomalies:
            raise validation.DataAnomalyError(
                f"{_count(result.anomalies, 'anomaly')} in the data against {result.reference} "
                "(each on an `anomaly:` line above); fix the data, or go on with it with "
                "allow_anomalies=True",
                page=render_validation_html([], statistics, result))

    def write(self, root: str, meta: DatasetMetadata, identifiers: Sequence[str],
              keep_columns: Sequence[str] = ()) -> Optional[DatasetStatistics]:
        """Writes a table's statistics, the comparison and the HTML page into local directory
        `root` (`keep_columns`: string columns the user keeps although they identify rows).

        Returns:
          The statistics (None: images).
        """
        if self.collector is None:
            return None  # images: nothing to add to the dataset
        statistics = self.collector.finish(identifiers)
        write_statistics(root, statistics)
        if self.result is not None:
            with open(os.path.join(root, VALIDATION_FILE), "w") as f:
                json.dump(dataclasses.asdict(self.result), f, indent=2)
        with open(os.path.join(root, REPORT_FILE), "w") as f:
            f.write(render_validation_html(explain_columns(meta, keep_columns=keep_columns),
                                           statistics, self.result, label_record(meta)))
        return statistics


def artifact_summary(dataset_dir: str, meta: DatasetMetadata, report_path: str,
                     keep_columns: Sequence[str] = ()) -> dict:
    """What the Dataset artifact's metadata says of the data check, from what `write` put
    into `dataset_dir`; the HTML page is copied to `report_path` (the step's HTML output).

    Returns:
      Each split's examples and shards, the feature, classes, split and task; `columns`
      (what became of each column); `label` (`class_counts.label_record`: its
      classes' examples per split, and warnings); for tables `statistics` (rows; per column
      its kind and missing share); with a reference `data_validation` (the reference, the
      anomalies, each drifted column's distance).
    """
    if os.path.isfile(os.path.join(dataset_dir, REPORT_FILE)):
        shutil.copyfile(os.path.join(dataset_dir, REPORT_FILE), report_path)
    else:
        with open(report_path, "w") as f:
            f.write(render_validation_html([], None, None))
    statistics = load_statistics(dataset_dir)
    validated = None
    if os.path.isfile(os.path.join(dataset_dir, VALIDATION_FILE)):
        with open(os.path.join(dataset_dir, VALIDATION_FILE)) as f:
            result = json.load(f)
        validated = {"reference": result["reference"],
                     "anomalies": [a["message"] for a in result["anomalies"]],
                     "drifted_columns": {d["column"]: round(d["value"], 4)
                                         for d in result["drifts"] if d["value"] > d["threshold"]}}
    summary = {
        "train_examples": meta.splits["train"].num_examples,
        "eval_examples": meta.splits["eval"].num_examples,
        "train_shards": len(meta.splits["train"].shards),
        "eval_shards": len(meta.splits["eval"].shards),
        "feature": meta.feature.key,
        "num_classes": meta.num_classes, "split": meta.split, "task": meta.task,
        "columns": explain_columns(meta, keep_columns=keep_columns)}
    label = label_record(meta)
    if label is not None:
        summary["label"] = label
    if statistics is not None:
        summary["statistics"] = {
            "rows": statistics.rows,
            "columns": {c.name: {"kind": c.kind, "missing_share": round(c.missing_share, 4)}
                        for c in statistics.columns}}
    if validated is not None:
        summary["data_validation"] = validated
    return summary
