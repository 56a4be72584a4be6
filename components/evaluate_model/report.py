"""The evaluation report: one self-contained HTML page and a short Markdown summary.

The HTML page (KFP shows an HTML artifact in an iframe) embeds its pictures
as base64 PNG data URIs and its styles inline, so it needs nothing else:
headline metrics and the blessing verdict, the new model beside the served
one (overall and per slice), training curves, the confusion matrix as a heat
map, a per-class table, the slices' accuracy (a bar chart and a table per
sliced column) and the training summary.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from kfdist.components.common.html_page import (card, list_items, page, percent, png_data_uri,
                                                table_rows)
from kfdist.components.evaluate_model.curves import curves_png
from kfdist.components.evaluate_model.fit_gap import fit_advice
from kfdist.components.common.wording import counted
from kfdist.components.evaluate_model.slices import MIN_SLICE_EXAMPLES, SliceMetrics, lowest

if TYPE_CHECKING:  # runtime re-exports this module's functions: no import cycle at run time
    from kfdist.components.common.model_artifact import TrainingReport
    from kfdist.components.evaluate_model.runtime import EvaluationResult

#: Slices per column the report shows: its first in report order (a string column's largest).
REPORTED_SLICES = 25


def _confusion_png(cm: List[List[int]], names: List[str]) -> str:
    """The confusion matrix as an annotated heat map (rows = true, columns = predicted)."""
    import numpy as np
    from matplotlib.figure import Figure

    counts = np.asarray(cm)
    k = len(names)
    side = min(max(4.0, 0.4 * k + 1.5), 14.0)
    fig = Figure(figsize=(side + 1.2, side))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(counts, cmap="Blues", interpolation="nearest")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(k))
    ax.set_yticks(range(k))
    ax.set_xticklabels(names, rotation=45 if max(map(len, names), default=0) > 3 else 0)
    ax.set_yticklabels(names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title("confusion matrix")
    if k <= 30:
        top = counts.max() or 1
        for t in range(k):
            for p in range(k):
                if counts[t, p]:
                    ax.text(p, t, str(counts[t, p]), ha="center", va="center", fontsize=8,
                            color="white" if counts[t, p] > top / 2 else "#1f2933")
    fig.tight_layout()
    return png_data_uri(fig)


def _slices_png(column: str, slices: Sequence[SliceMetrics], overall: float,
                threshold: float) -> str:
    """Each slice's accuracy as a bar (below the threshold in red), with the overall accuracy
    and the threshold as lines."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 1.4 + 0.32 * len(slices)))
    ax = fig.add_subplot(1, 1, 1)
    rows = range(len(slices))
    ax.barh(rows, [s.accuracy for s in slices],
            color=["#d64545" if s.accuracy < threshold else "#3e7cb1" for s in slices])
    ax.set_yticks(rows)
    ax.set_yticklabels([f"{s.value} (n={s.examples:,})" for s in slices])
    ax.invert_yaxis()
    ax.axvline(overall, color="#1f2933", linestyle="--")
    ax.axvline(threshold, color="#d64545", linestyle=":")
    for row, s in zip(rows, slices):
        inside = s.accuracy > 0.15
        ax.text(s.accuracy - 0.01 if inside else s.accuracy + 0.01, row, percent(s.accuracy),
                ha="right" if inside else "left", va="center", fontsize=8,
                color="white" if inside else "#1f2933")
    ax.set_xlim(0.0, 1.0)
    ax.set_title(f"accuracy by {column}\n(dashed: all examples {overall:.1%}; dotted: "
                 f"threshold {threshold:.1%})", fontsize=10)
    fig.tight_layout()
    return png_data_uri(fig)


def _slices_html(result: EvaluationResult) -> List[str]:
    """Per sliced column: a bar chart and a table of its slices (the first `REPORTED_SLICES`),
    with the served model's accuracy beside each when it was compared."""
    if not result.slices:
        return []
    from kfdist.components.evaluate_model import served_outputs

    served = served_outputs.served_slices(result)
    parts = ["<h2>Slices</h2><p class='muted'>The eval examples grouped by each column's value "
             "(numbers with many values: by quantile bins).</p>"]
    for column in dict.fromkeys(s.column for s in result.slices):
        every = [s for s in result.slices if s.column == column]
        shown = every[:REPORTED_SLICES]
        chart = _slices_png(column, shown, result.accuracy, result.threshold)
        beside = ("<th>served</th><th>change</th>" if served else "")
        parts += [f"<h3>{html.escape(column)}</h3><div class='row'>",
                  f'<img alt="accuracy by {html.escape(column)}" src="{chart}">',
                  "<table><tr><th>slice</th><th>examples</th><th>accuracy</th><th>loss</th>"
                  f"<th>vs all</th>{beside}</tr>",
                  table_rows((s.value, f"{s.examples:,}", percent(s.accuracy), f"{s.loss:.4f}",
                              f"{100 * (s.accuracy - result.accuracy):+.1f} pp",
                              *served_outputs.served_cells(s, served)) for s in shown),
                  "</table></div>"]
        if len(every) > len(shown):
            rest = every[len(shown):]
            parts.append(f"<p class='muted'>{counted(len(rest), 'smaller slice')} "
                         f"({counted(sum(s.examples for s in rest), 'example')}) not "
                         "shown.</p>")
    return parts


def _advice_html(result: EvaluationResult, history: Dict[str, List[float]],
                 training_report: Optional[TrainingReport]) -> List[str]:
    """What the curves say about over-fitting (`fit_gap`): a warning, a note, or nothing."""
    advice = fit_advice(history, training_report.final_accuracy if training_report else None,
                        result.accuracy, training_report.kept() if training_report else None)
    if advice is None:
        return []
    text = html.escape(advice.text[0].upper() + advice.text[1:])
    return [f"<div class='{'warn' if advice.warning else 'note'}'>{text}.</div>"]


def _kept_html(training_report: Optional[TrainingReport]) -> List[str]:
    """Which epoch the model holds and why, under the curves."""
    kept = training_report.kept() if training_report else None
    if kept is None:
        return []
    return [f"<p>The model holds the weights of epoch {kept.epoch}: "
            f"{html.escape(kept.describe())}.</p>"]


def _what_html(result: EvaluationResult, run_name: Optional[str]) -> List[str]:
    """The line naming the run and the data evaluated (none when neither is known)."""
    named = ([f"run <b>{html.escape(run_name)}</b>"] if run_name else []) + (
        [f"data <b>{html.escape(result.data_source)}</b>"] if result.data_source else [])
    return [f"<p>{' · '.join(named)}</p>"] if named else []


def render_report_html(result: EvaluationResult, history: Dict[str, List[float]],
                       training_report: Optional[TrainingReport],
                       run_name: Optional[str] = None) -> str:
    """Renders the evaluation as one self-contained HTML page.

    Args:
      result: The evaluation to report.
      history: Per-epoch metric lists (`model_artifact.read_history`); may be empty.
      training_report: The model's training report, or None.
      run_name: The pipeline run the model was trained and evaluated in; None: not named.

    Returns:
      The HTML document; pictures are embedded as `data:image/png;base64` URIs.
    """
    from kfdist.components.evaluate_model import served_outputs

    verdict = "Blessed" if result.blessed else "Not blessed"
    parts = [
        *_what_html(result, run_name),
        f'<div class="verdict {"ok" if result.blessed else "no"}">{verdict}: '
        f"{html.escape(result.reason)}</div>",
        *_advice_html(result, history, training_report),
        '<div class="cards">', card("accuracy", percent(result.accuracy)),
        card("loss", f"{result.loss:.4f}"), card("eval examples", f"{result.num_examples:,}"),
        card("threshold", percent(result.threshold)),
    ]
    parts += [*served_outputs.served_cards(result), "</div>", *served_outputs.served_html(result),
              "<h2>Training curves</h2>"]
    kept = training_report.kept() if training_report else None
    curves = curves_png(history, training_report.evaluations if training_report else (),
                        kept.epoch if kept is not None else None)
    parts.append(f'<img alt="training curves" src="{curves}">' if curves
                 else '<p class="muted">No training history was recorded.</p>')
    parts += _kept_html(training_report)
    parts += ["<h2>Confusion matrix and per-class metrics</h2><div class='row'>",
              f'<img alt="confusion matrix" src="{_confusion_png(result.confusion_matrix, result.class_names)}">',
              "<table><tr><th>class</th><th>examples</th><th>precision</th><th>recall</th></tr>",
              table_rows((c.name, c.support, percent(c.precision), percent(c.recall))
                         for c in result.per_class),
              "</table></div>"]
    parts += _slices_html(result)
    if result.excluded_columns:
        parts += ["<h2>Columns left out</h2><ul>", list_items(result.excluded_columns), "</ul>"]
    parts.append("<h2>Training</h2>")
    if training_report is None:
        parts.append('<p class="muted">No training report was recorded.</p>')
    else:
        r = training_report
        parts += ["<table class='kv'>", table_rows([
            ("backend", r.backend), ("strategy", r.strategy), ("workers", r.workers),
            ("model", r.model_name), ("epochs", r.epochs),
            *([("epoch kept", kept.describe())] if kept is not None else []),
            ("training loss (epoch kept)", f"{r.final_loss:.4f}"),
            ("training accuracy (epoch kept)", percent(r.final_accuracy)),
            ("throughput", f"{r.examples_per_second:,.0f} examples/s"),
            ("time in model.fit", f"{r.wall_seconds:.1f} s (the training step's start-up and "
                                  "saving not included)"),
            ("replica processes", len(r.replicas)),
        ] + ([("side-car evaluator", ", ".join(
            f"epoch {e['epoch']}: {percent(e.get('accuracy'))}" for e in r.evaluations))]
             if r.evaluations else [])), "</table>"]
    return page("evaluation", "Model evaluation", parts)


def render_report_markdown(result: EvaluationResult) -> str:
    """Renders a short Markdown summary (for a KFP Markdown visualization)."""
    from kfdist.components.evaluate_model import served_outputs

    lines = [
        "## Model evaluation",
        "",
        f"**{'Blessed' if result.blessed else 'Not blessed'}**: {result.reason}",
        "",
        "| metric | value |",
        "| --- | --- |",
        f"| accuracy | {result.accuracy:.4f} |",
        f"| loss | {result.loss:.4f} |",
        f"| eval examples | {result.num_examples} |",
        f"| threshold | {result.threshold:.4f} |",
    ]
    lines += served_outputs.served_markdown(result)
    worst = sorted((c for c in result.per_class if c.recall is not None), key=lambda c: c.recall)[:3]
    if worst:
        lines += ["", "Lowest recall: " + ", ".join(f"`{c.name}` {percent(c.recall)}" for c in worst)]
    weakest = lowest(result.slices, 3)
    if weakest:
        lines += ["", "Lowest-accuracy slices: " + ", ".join(
            f"`{s.key}` {percent(s.accuracy)} ({s.examples} examples)"
            for s in weakest) + f" (of the slices of at least "
            f"{MIN_SLICE_EXAMPLES} examples)"]
    lines += served_outputs.served_slices_markdown(result)
    if result.excluded_columns:
        lines += ["", "Columns left out of the dataset:", ""]
        lines += [f"- {line}" for line in result.excluded_columns]
    return "\n".join(lines) + "\n"

