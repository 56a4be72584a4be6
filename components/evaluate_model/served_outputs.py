"""What the evaluation's outputs show of the served model, beside the new one.

The step's `metrics` (`metric_values`), the blessing's record
(`served_verdict`), and the report's parts: cards and a table of both models
overall, a served and a change column per slice, or why no served model was
compared.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Dict, List

from kfdist.components.evaluate_model import slices as sl
from kfdist.components.common.html_page import card, percent, table_rows
from kfdist.components.evaluate_model.report import REPORTED_SLICES

if TYPE_CHECKING:
    from kfdist.components.evaluate_model.runtime import EvaluationResult


def metric_values(result: EvaluationResult) -> Dict[str, float]:
    """The step's `metrics`: accuracy, loss, examples and the slices'; with a compared
    served model also `served_accuracy`, `served_loss`, `accuracy_change`, `served_version`
    and each shown slice's `served_accuracy[column=value]`."""
    values = {"accuracy": result.accuracy, "loss": result.loss,
              "eval_examples": result.num_examples, **sl.metric_values(result.slices)}
    served = result.served
    if served is not None and served.compared:
        values.update(served_accuracy=served.accuracy, served_loss=served.loss,
                      accuracy_change=result.accuracy_change, served_version=served.version)
        by_key = served_slices(result)
        for name in [n for n in values if n.startswith("accuracy[")]:
            key = name[len("accuracy["):-1]
            if key in by_key:
                values[f"served_{name}"] = by_key[key].accuracy
    return values


def served_verdict(result: EvaluationResult) -> Dict[str, object]:
    """What the blessing records of the served model: where it is, its accuracy and the change
    (or why it was not compared); empty when none is served."""
    served = result.served
    if served is None:
        return {}
    if not served.compared:
        return {"served_path": served.path, "served_not_compared": served.mismatch,
                **({"served_class_change": True} if served.class_change else {})}
    return {"served_path": served.path, "served_version": served.version,
            "served_accuracy": served.accuracy, "accuracy_change": result.accuracy_change,
            "min_improvement": result.min_improvement}


def served_slices(result: EvaluationResult) -> Dict[str, sl.SliceMetrics]:
    """The served model's slices by `column=value`, when it was compared."""
    served = result.served
    return {s.key: s for s in served.slices} if served is not None and served.compared else {}


def served_cells(s: sl.SliceMetrics, served: Dict[str, sl.SliceMetrics]) -> tuple:
    """The served model's accuracy on a slice and the change (none without a compared model)."""
    if not served:
        return ()
    other = served.get(s.key)
    if other is None:
        return ("–", "–")
    return (percent(other.accuracy), f"{100 * (s.accuracy - other.accuracy):+.1f} pp")


def served_cards(result: EvaluationResult) -> List[str]:
    """The served model's accuracy and the change, as headline cards, when it was compared."""
    if result.accuracy_change is None:
        return []
    return [card(f"served (version {result.served.version})", percent(result.served.accuracy)),
            card("change", f"{100 * result.accuracy_change:+.1f} pp")]


def _class_change_words(result: EvaluationResult) -> str:
    """What became of a served model with other classes."""
    if result.allow_class_change:
        return "allow_class_change lets the new model replace it: the threshold alone decided."
    return ("A model with other classes replaces it only with allow_class_change=True: the "
            "new model is not blessed.")


def none_served_html(served_root: str) -> str:
    """The report's line when no served model was found under `served_root` (or none given)."""
    where = f"under {html.escape(served_root)}" if served_root else "(no export base given)"
    return f"<p class='muted'>No served model {where}: the threshold alone decided.</p>"


def served_html(result: EvaluationResult) -> List[str]:
    """The new model beside the served one, or why none was compared."""
    served = result.served
    parts = ["<h2>Against the served model</h2>"]
    if served is None:
        return parts + [none_served_html(result.served_root)]
    if served.class_change:
        return parts + [f"<div class='warn'>The served model {html.escape(served.path)} predicts "
                        f"other classes: {html.escape(served.mismatch or '')}. "
                        f"{html.escape(_class_change_words(result))}</div>"]
    if not served.compared:
        return parts + [f"<div class='warn'>The served model {html.escape(served.path)} could not "
                        f"be compared: {html.escape(served.mismatch or '')}. The threshold alone "
                        "decided.</div>"]
    return parts + [
        f"<p class='muted'>Version {served.version} ({html.escape(served.path)}), scored on the "
        f"same held-out examples. Needed: a change of at least {result.min_improvement:+.3f}.</p>",
        "<table><tr><th>metric</th><th>new model</th><th>served model</th><th>change</th></tr>",
        table_rows([("accuracy", percent(result.accuracy), percent(served.accuracy),
                     f"{100 * (result.accuracy - served.accuracy):+.1f} pp"),
                    ("loss", f"{result.loss:.4f}", f"{served.loss:.4f}",
                     f"{result.loss - served.loss:+.4f}")]), "</table>"]


def served_markdown(result: EvaluationResult) -> List[str]:
    """The served model's rows of the Markdown table, or a line saying why there are none."""
    served = result.served
    if served is None:
        where = f"under `{result.served_root}`" if result.served_root else "(no export base given)"
        return ["", f"No served model {where}: the threshold alone decided."]
    if served.class_change:
        return ["", f"⚠️ The served model `{served.path}` predicts other classes: "
                    f"{served.mismatch}. {_class_change_words(result)}"]
    if not served.compared:
        return ["", f"⚠️ The served model `{served.path}` could not be compared: "
                    f"{served.mismatch}. The threshold alone decided."]
    return [f"| served accuracy (version {served.version}) | {served.accuracy:.4f} |",
            f"| served loss | {served.loss:.4f} |",
            f"| accuracy change | {result.accuracy_change:+.4f} "
            f"(needed ≥ {result.min_improvement:+.4f}) |"]


def served_slices_markdown(result: EvaluationResult) -> List[str]:
    """A Markdown table of each slice's accuracy, new and served, when it was compared."""
    served = served_slices(result)
    if not served or not result.slices:
        return []
    return ["", "| slice | examples | new | served | change |",
            "| --- | --- | --- | --- | --- |"] + [
        f"| `{s.key}` | {s.examples} | {percent(s.accuracy)} | "
        + " | ".join(served_cells(s, served)) + " |" for s in result.slices[:REPORTED_SLICES]]
