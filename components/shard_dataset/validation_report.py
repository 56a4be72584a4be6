"""The shard step's HTML section (KFP shows an HTML artifact in an iframe): the label's
classes, the columns, the data's statistics and, with a reference, the anomalies and each
column's drift.

Self-contained (inline styles, the evaluation report's: `common.html_page`).
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Optional, Sequence

from kfdist.components.common.dataset_statistics import NUMERIC, DatasetStatistics
from kfdist.components.common.html_page import list_items, page, table_rows
from kfdist.components.common.wording import counted
from kfdist.components.shard_dataset.validation import ValidationResult

REPORT_FILE = "data_validation.html"


def _statistics_rows(statistics: DatasetStatistics):
    for c in statistics.columns:
        if c.kind == NUMERIC:
            spread = ("–" if c.minimum is None
                      else f"{c.minimum:.4g} to {c.maximum:.4g}, mean {c.mean:.4g}")
        else:
            top = ", ".join(f"{v} ({n})" for v, n in list((c.value_counts or {}).items())[:3])
            spread = f"{c.distinct_values:,} values: {top}" + (" (identifies rows)"
                                                               if c.identifier else "")
        yield c.name, c.kind, f"{100 * c.missing_share:.1f}%", spread


def _validation_html(result: Optional[ValidationResult]) -> Sequence[str]:
    if result is None:
        return ['<p class="muted">No reference to compare with: the data is described, '
                "not checked.</p>"]
    parts = [f"<p>Reference: {html.escape(result.reference)}</p>"]
    if result.anomalies:
        parts += ['<div class="verdict no">Anomalies: the data breaks the reference\'s schema<ul>',
                  list_items(a.message for a in result.anomalies),
                  "</ul></div>"]
    else:
        parts.append('<div class="verdict ok">No anomaly: the schema matches the reference.</div>')
    if result.drifted:
        parts.append(f'<div class="warn">Drift in {counted(len(result.drifted), "column")}: '
                     + html.escape(", ".join(d.column for d in result.drifted)) + "</div>")
    parts += ["<h3>Drift per column</h3><table><tr><th>column</th><th>measure</th>"
              "<th>distance</th><th>threshold</th><th>verdict</th></tr>",
              table_rows((d.column, d.measure, f"{d.value:.4f}", f"{d.threshold:g}",
                          "drifted" if d.drifted else "within") for d in result.drifts), "</table>"]
    if result.notes:
        parts += ["<ul>", list_items(result.notes), "</ul>"]
    return parts


def _label_html(label: Optional[Mapping[str, Any]]) -> Sequence[str]:
    """The label's classes with their examples per split, and its warnings."""
    if not label:
        return []
    column = f" ({html.escape(label['column'])})" if label.get("column") else ""
    if "classes" not in label:  # a regression's: a number (`label_numbers.number_record`)
        return _number_html(label, column)
    total = sum(c["train"] + c["eval"] for c in label["classes"]) or 1
    parts = [f"<h2>Label{column}: {len(label['classes'])} classes</h2>"]
    parts += [f'<div class="warn">{html.escape(w)}</div>' for w in label.get("warnings") or ()]
    return parts + ["<table><tr><th>class</th><th>train</th><th>held out</th><th>share</th></tr>",
                    table_rows((c["name"], f"{c['train']:,}", f"{c['eval']:,}",
                                f"{(c['train'] + c['eval']) / total:.1%}")
                               for c in label["classes"]), "</table>"]


def _number_html(label: Mapping[str, Any], column: str) -> Sequence[str]:
    """A regression's label: its mean, deviation and range per split."""
    parts = [f"<h2>Label{column}: a number (regression)</h2>"]
    parts += [f'<div class="warn">{html.escape(w)}</div>' for w in label.get("warnings") or ()]
    rows = [(name, f"{s['examples']:,}", f"{s['mean']:.4g}", f"{s['std']:.4g}",
             f"{s['min']:.4g}", f"{s['max']:.4g}")
            for split, name in (("train", "train"), ("eval", "held out"))
            if (s := label.get(split))]
    return parts + ["<table><tr><th>split</th><th>examples</th><th>mean</th><th>deviation</th>"
                    "<th>min</th><th>max</th></tr>", table_rows(rows), "</table>"]


def render_validation_html(columns: Sequence[str], statistics: Optional[DatasetStatistics],
                           result: Optional[ValidationResult],
                           label: Optional[Mapping[str, Any]] = None) -> str:
    """The shard step's page.

    Args:
      columns: What became of each column (`column_report.explain_columns`); none when the
        check stopped the step before the dataset was built.
      statistics: The data's statistics (None: images).
      result: The comparison with the reference (None: no reference).
      label: The label's classes (`class_counts.label_record`; None: not counted).
    """
    if statistics is None:
        parts = ['<p class="muted">Statistics and validation describe tables; this dataset '
                 "holds images.</p>"]
    else:
        parts = [*_validation_html(result), *_label_html(label),
                 *(["<h2>Columns</h2><ul>", list_items(columns), "</ul>"] if columns else []),
                 f"<h2>Statistics ({statistics.rows:,} rows)</h2><table><tr><th>column</th>"
                 "<th>kind</th><th>missing</th><th>values</th></tr>",
                 table_rows(_statistics_rows(statistics)), "</table>"]
    return page("data", "Data validation", parts)
