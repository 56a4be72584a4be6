"""The evaluation's part of a regression's `summary.json` and of the lines `kfdist run` ends with.

A regression's evaluation logs `rmse`, `mae`, `r2` and `rmse_threshold` as its
metrics (`evaluate_model/regression_eval`) in place of a classifier's accuracy;
`run_summary` hands them here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping


def is_regression(metrics: Mapping[str, Any]) -> bool:
    """Whether an evaluation's metrics are a regression's."""
    return "rmse" in metrics


def eval_record(metrics: Mapping[str, Any], blessing: Mapping[str, Any],
                served: Dict[str, Any]) -> Dict[str, Any]:
    """The `eval` part of `summary.json`: `task`, `rmse`, `mae`, `r2`, `threshold` (the RMSE
    blessed at most), `slices` (by `column=value`: `rmse` and `examples`), `reason`, `served`."""
    from kfdist.components.evaluate_model.slices import from_metric_values

    if "rmse_change" in blessing:
        served.update(rmse_change=blessing["rmse_change"],
                      min_improvement=blessing.get("min_improvement"))
    return {"task": "regression", "rmse": metrics["rmse"], "mae": metrics.get("mae"),
            "r2": metrics.get("r2"), "loss": metrics.get("loss"),
            "threshold": metrics.get("rmse_threshold"),
            "slices": from_metric_values(dict(metrics)),
            "reason": blessing.get("reason"), "served": served or None}


def verdict_lines(evaluation: Mapping[str, Any], blessed: bool) -> List[str]:
    """The line of the held-out figures and the verdict, and the highest-RMSE slice's."""
    served = evaluation.get("served") or {}
    against = (f"; served version {served['version']}: RMSE {served['rmse']:.4f}"
               if served.get("rmse") is not None else "")
    r2 = "" if evaluation.get("r2") is None else f", R² {evaluation['r2']:.4f}"
    lines = [f"held-out RMSE {evaluation['rmse']:.4f}, MAE {evaluation['mae']:.4f}{r2} "
             f"(threshold {evaluation['threshold']:.4f}{against}): "
             f"{'blessed' if blessed else 'not blessed'}"]
    slices = {k: v for k, v in (evaluation.get("slices") or {}).items() if "rmse" in v}
    if slices:
        key, worst = max(slices.items(), key=lambda item: item[1]["rmse"])
        lines.append(f"highest-RMSE slice: {key} {worst['rmse']:.4f} "
                     f"({int(worst.get('examples', 0)):,} examples; every slice in the "
                     "evaluation's report)")
    return lines
