"""The one figure `kfdist run` shows for each finished step, from the step's outputs."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping

from kfdist.components.common.class_counts import label_lines
from kfdist.components.common.wording import counted


def _shard(outputs: Mapping[str, Any], epochs: int) -> str:
    meta = outputs.get("dataset") or {}
    if "train_examples" not in meta:
        return ""
    # KFP keeps numeric metadata as floats.
    train, held_out = int(meta["train_examples"]), int(meta.get("eval_examples", 0))
    how = {"predefined": ": the source's own split", "hash": ": a hash split"}.get(
        meta.get("split"), "")
    figure = (f"{counted(train + held_out, 'example')} written ({train:,} train in "
              f"{counted(meta.get('train_shards', 0), 'shard')}, {held_out:,} eval{how})")
    return figure + "".join(f"\n{SHARD_DETAIL_INDENT}{line}" for line in _data_lines(meta))


#: Where the shard step's lines under its figure start (below the step names).
SHARD_DETAIL_INDENT = " " * 12


def _data_lines(meta: Mapping[str, Any]) -> List[str]:
    """What became of each column of a table, its label's classes, and its check against the
    reference."""
    lines = list(meta.get("columns") or ()) + label_lines(meta.get("label"))
    checked = meta.get("data_validation")
    if checked:
        anomalies, drifted = checked.get("anomalies") or [], checked.get("drifted_columns") or {}
        found = (f"{len(anomalies)} anomal{'y' if len(anomalies) == 1 else 'ies'} (allowed)"
                 if anomalies else "no anomaly")
        drift = (f"drift in {', '.join(f'{c} ({v:.3f})' for c, v in drifted.items())}"
                 if drifted else "no drift")
        lines.append(f"data validation against {checked.get('reference')}: {found}, {drift}")
        lines += [f"anomaly: {a}" for a in anomalies]
    return lines


def _train(outputs: Mapping[str, Any], epochs: int) -> str:
    metrics = outputs.get("metrics") or {}
    figure = "rmse" if "final_rmse" in metrics else "accuracy"  # a regression's: its RMSE
    if f"final_{figure}" not in metrics:
        return ""
    from kfdist.components.common.kept_epoch import KeptEpoch

    held_out = (f", held-out {metrics[f'final_val_{figure}']:.4f}"
                if metrics.get(f"final_val_{figure}") is not None else "")
    # The step's time (`done in`) also starts the replicas and saves the model: say fit's.
    fit = metrics.get("training_seconds")
    kept = KeptEpoch.from_metrics(metrics)
    ran = f"{counted(epochs, 'epoch')}, " if epochs else ""
    text = (f"{kept.describe()}; " if kept is not None else ran) + (
        f"{fit:.1f}s of it in model.fit, " if fit is not None else "") + (
        f"training {figure.replace('rmse', 'RMSE')} {metrics[f'final_{figure}']:.4f}{held_out}, "
        f"{metrics.get('examples_per_second', 0):,.0f} examples/s")
    restarts = int(metrics.get("restarts", 0) or 0)
    text += f", {counted(restarts, 'replica restart')}" if restarts else ""
    lowered = metrics.get("lowered_batch_size")
    return text + (f"; --batch-size lowered to {int(lowered)}: the train split holds less than "
                   "one global batch" if lowered else "")


def _evaluate(outputs: Mapping[str, Any], epochs: int) -> str:
    blessing = outputs.get("blessing") or {}
    if "reason" not in blessing:
        return ""
    return f"held-out {blessing['reason']}: {'blessed' if blessing.get('blessed') else 'not blessed'}"


def _export(outputs: Mapping[str, Any], epochs: int) -> str:
    path = outputs.get("export_path")
    return f"exported to {path}" if path else ""


_FIGURES: Dict[str, Callable[[Mapping[str, Any], int], str]] = {
    "shard": _shard, "train": _train, "evaluate": _evaluate, "export": _export,
}


def step_figure(step: str, outputs: Mapping[str, Any], epochs: int = 0) -> str:
    """The figure that matters for a finished `step`, or "" when its outputs lack it.

    Args:
      step: Short step name (`shard`, `train`, `evaluate`, `export`).
      outputs: The step's outputs: parameters by name, artifacts as their metadata.
      epochs: Epochs the console saw finish (training only).
    """
    figure = _FIGURES.get(step)
    return figure(outputs, epochs) if figure else ""
