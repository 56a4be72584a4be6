"""A regression's evaluation report: one self-contained HTML page and a Markdown summary.

As the classification report (`report`) does, the page embeds its pictures
as PNG data URIs: the verdict, RMSE, MAE and R² beside the served model's,
the training curves, the predictions plotted against the actual labels and
the residuals against the predictions (no confusion matrix: there are no
classes), the slices by RMSE, and the training: its curves, the epoch kept and
its figures.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from kfdist.components.common.html_page import card, list_items, page, png_data_uri, table_rows
from kfdist.components.evaluate_model.curves import curves_png
from kfdist.components.evaluate_model.fit_gap import fit_advice
from kfdist.components.evaluate_model.regression_eval import RegressionEvaluation
from kfdist.components.evaluate_model.report import REPORTED_SLICES
from kfdist.components.evaluate_model.served_outputs import none_served_html
from kfdist.components.evaluate_model.slices import MIN_SLICE_EXAMPLES, SliceMetrics

if TYPE_CHECKING:
    from kfdist.components.common.model_artifact import TrainingReport

#: The plots' alt texts, which name them.
PREDICTED_PLOT, RESIDUALS_PLOT = "predicted against actual", "residuals"


def _axis_label(result: RegressionEvaluation, what: str) -> str:
    return f"{what} {result.label_column}" if result.label_column else what


def predicted_png(result: RegressionEvaluation) -> str:
    """Each held-out example's prediction against its label, with the line of perfect ones."""
    from matplotlib.figure import Figure  # Agg canvas, no pyplot state

    fig = Figure(figsize=(5.2, 4.8))
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(result.labels, result.predicted, s=12, alpha=0.6, color="#3e7cb1")
    low = min(result.labels + result.predicted)
    high = max(result.labels + result.predicted)
    ax.plot([low, high], [low, high], color="#1f2933", linestyle="--", linewidth=1,
            label="predicted = actual")
    ax.set_xlabel(_axis_label(result, "actual"))
    ax.set_ylabel(_axis_label(result, "predicted"))
    r2 = "" if result.r2 is None else f", R² {result.r2:.3f}"
    ax.set_title(f"{PREDICTED_PLOT} ({len(result.labels):,} held-out examples{r2})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return png_data_uri(fig)


def residuals_png(result: RegressionEvaluation) -> str:
    """Each held-out example's residual (predicted minus actual) against its prediction, and
    the residuals' histogram."""
    from matplotlib.figure import Figure  # Agg canvas, no pyplot state

    residuals = [p - a for p, a in zip(result.predicted, result.labels)]
    fig = Figure(figsize=(10, 3.8))
    ax = fig.add_subplot(1, 2, 1)
    ax.scatter(result.predicted, residuals, s=12, alpha=0.6, color="#3e7cb1")
    ax.axhline(0.0, color="#1f2933", linestyle="--", linewidth=1)
    ax.set_xlabel(_axis_label(result, "predicted"))
    ax.set_ylabel("residual (predicted - actual)")
    ax.set_title(f"{RESIDUALS_PLOT} against the prediction")
    ax.grid(alpha=0.3)
    hist = fig.add_subplot(1, 2, 2)
    hist.hist(residuals, bins=min(40, max(10, len(residuals) // 10)), color="#3e7cb1")
    hist.axvline(0.0, color="#1f2933", linestyle="--", linewidth=1)
    hist.set_xlabel("residual (predicted - actual)")
    hist.set_ylabel("examples")
    hist.set_title(f"{RESIDUALS_PLOT}: RMSE {result.rmse:.4g}, MAE {result.mae:.4g}")
    fig.tight_layout()
    return png_data_uri(fig)


def _served_html(result: RegressionEvaluation) -> List[str]:
    served = result.served
    parts = ["<h2>Against the served model</h2>"]
    if served is None:
        return parts + [none_served_html(result.served_root)]
    if not served.compared or served.rmse is None:
        return parts + [f"<div class='warn'>The served model {html.escape(served.path)} could not "
                        f"be compared: {html.escape(served.mismatch or '')}.</div>"]
    return parts + [
        f"<p class='muted'>Version {served.version} ({html.escape(served.path)}), scored on the "
        "same held-out examples.</p>",
        "<table><tr><th>metric</th><th>new model</th><th>served model</th><th>change</th></tr>",
        table_rows([("RMSE", f"{result.rmse:.4g}", f"{served.rmse:.4g}",
                     f"{result.rmse - served.rmse:+.4g}"),
                    ("MAE", f"{result.mae:.4g}", f"{served.mae:.4g}",
                     f"{result.mae - served.mae:+.4g}")]), "</table>"]


def _slices_html(slices: Sequence[SliceMetrics], overall: float) -> List[str]:
    if not slices:
        return []
    parts = ["<h2>Slices</h2>"]
    for column in dict.fromkeys(s.column for s in slices):
        shown = [s for s in slices if s.column == column][:REPORTED_SLICES]
        parts += [f"<h3>{html.escape(column)}</h3>",
                  "<table><tr><th>slice</th><th>examples</th><th>RMSE</th>"
                  "<th>vs. all examples</th></tr>",
                  table_rows((s.value, f"{s.examples:,}", f"{s.rmse:.4g}",
                              f"{s.rmse - overall:+.4g}") for s in shown), "</table>"]
    return parts


def _training_html(history: Dict[str, List[float]],
                   training: Optional[TrainingReport]) -> List[str]:
    """The curves' advice, the curves, the epoch kept and why, and the training's figures."""
    kept = training.kept() if training is not None else None
    advice = fit_advice(history, None, None, kept)
    parts = [] if advice is None else [
        f"<div class='{'warn' if advice.warning else 'note'}'>"
        f"{html.escape(advice.text[0].upper() + advice.text[1:])}.</div>"]
    curves = curves_png(history, training.evaluations if training else (),
                        kept.epoch if kept is not None else None)
    parts += ["<h2>Training curves</h2>",
              f'<img alt="training curves" src="{curves}">' if curves
              else '<p class="muted">No training history was recorded.</p>']
    if training is None:
        return parts
    rmse = "–" if training.final_rmse is None else f"{training.final_rmse:.4g}"
    return parts + [
        *([f"<p>The model holds the weights of epoch {kept.epoch}: "
           f"{html.escape(kept.describe())}.</p>"] if kept is not None else []),
        "<h2>Training</h2><table class='kv'>", table_rows([
            ("backend", training.backend), ("strategy", training.strategy),
            ("workers", training.workers), ("model", training.model_name),
            ("epochs", training.epochs), ("training RMSE (epoch kept)", rmse),
            ("throughput", f"{training.examples_per_second:,.0f} examples/s"),
            ("time in model.fit", f"{training.wall_seconds:.1f} s")]), "</table>"]


def render_regression_html(result: RegressionEvaluation, history: Dict[str, List[float]],
                           training: Optional[TrainingReport] = None,
                           run_name: Optional[str] = None) -> str:
    """Renders a regression's evaluation as one self-contained HTML page.

    Args:
      result: The evaluation to report.
      history: Per-epoch metric lists (`model_artifact.read_history`); may be empty.
      training: The model's training report (the epoch kept, the side-car evaluator's
        results, the training's figures); None: not recorded.
      run_name: The pipeline run; None: not named.
    """
    named = ([f"run <b>{html.escape(run_name)}</b>"] if run_name else []) + (
        [f"data <b>{html.escape(result.data_source)}</b>"] if result.data_source else [])
    r2 = "–" if result.r2 is None else f"{result.r2:.3f}"
    parts = [*([f"<p>{' · '.join(named)}</p>"] if named else []),
             f'<div class="verdict {"ok" if result.blessed else "no"}">'
             f'{"Blessed" if result.blessed else "Not blessed"}: {html.escape(result.reason)}'
             "</div>", '<div class="cards">', card("RMSE", f"{result.rmse:.4g}"),
             card("MAE", f"{result.mae:.4g}"), card("R²", r2),
             card("eval examples", f"{result.num_examples:,}"),
             card("RMSE threshold", f"{result.threshold:.4g}"),
             card("predicting the mean", f"RMSE {result.baseline_rmse:.4g}"), "</div>",
             *_served_html(result), "<h2>Predictions</h2>",
             f'<img alt="{PREDICTED_PLOT}" src="{predicted_png(result)}">',
             f'<img alt="{RESIDUALS_PLOT}" src="{residuals_png(result)}">',
             *_slices_html(result.slices, result.rmse), *_training_html(history, training)]
    if result.excluded_columns:
        parts += ["<h2>Columns left out</h2><ul>", list_items(result.excluded_columns), "</ul>"]
    return page("evaluation", "Model evaluation (regression)", parts)


def render_regression_markdown(result: RegressionEvaluation) -> str:
    """Renders a short Markdown summary (for a KFP Markdown visualization)."""
    r2 = "–" if result.r2 is None else f"{result.r2:.4f}"
    lines = ["## Model evaluation (regression)", "",
             f"**{'Blessed' if result.blessed else 'Not blessed'}**: {result.reason}", "",
             "| metric | value |", "| --- | --- |", f"| RMSE | {result.rmse:.4f} |",
             f"| MAE | {result.mae:.4f} |", f"| R² | {r2} |",
             f"| eval examples | {result.num_examples} |",
             f"| RMSE threshold | {result.threshold:.4f} |"]
    served = result.served
    if served is not None and served.compared and served.rmse is not None:
        lines.append(f"| served RMSE (version {served.version}) | {served.rmse:.4f} |")
    worst = sorted((s for s in result.slices if s.examples >= MIN_SLICE_EXAMPLES),
                   key=lambda s: -s.rmse)[:3]
    if worst:
        lines += ["", "Highest-RMSE slices: " + ", ".join(
            f"`{s.key}` {s.rmse:.4g} ({s.examples} examples)" for s in worst)]
    return "\n".join(lines) + "\n"
