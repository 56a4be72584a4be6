"""The evaluation report's training curves: loss and accuracy (a regression's: RMSE) per epoch,
the kept epoch marked.

Each panel draws the training figure, the validation part's (which selected
the epoch kept, with early stopping), the held-out eval split's (scored by
the leader after every epoch, never used to choose) and the side-car
evaluator's result on each epoch's checkpoint, when there was one; a dotted
vertical line marks the epoch whose weights the model holds.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from kfdist.components.common.html_page import png_data_uri
from kfdist.components.common.kept_epoch import SELECTION_ACCURACY, SELECTION_LOSS

#: The side-car evaluator's curve, beside the training and validation curves.
EVALUATOR_LABEL = "evaluator (checkpoints)"
#: Each curve's history key by panel, and its label.
CURVES = {
    "loss": (("loss", "training"), (SELECTION_LOSS, "validation part (selects the epoch)"),
             ("val_loss", "held-out (eval split)")),
    "accuracy": (("accuracy", "training"),
                 (SELECTION_ACCURACY, "validation part (selects the epoch)"),
                 ("val_accuracy", "held-out (eval split)")),
    # A regression's: its panels of loss (the MSE) and RMSE, no accuracy.
    "rmse": (("rmse", "training"), ("selection_rmse", "validation part (selects the epoch)"),
             ("val_rmse", "held-out (eval split)")),
}


def curves_png(history: Dict[str, List[float]], evaluations: Sequence[Dict[str, float]] = (),
               kept_epoch: Optional[int] = None) -> Optional[str]:
    """Loss and accuracy per epoch as a PNG data URI; None without a curve to draw.

    Args:
      history: Per-epoch metric lists (`model_artifact.read_history`).
      evaluations: The side-car evaluator's results (`{"epoch", "loss", "accuracy"}`).
      kept_epoch: The epoch whose weights the model holds, marked; None: not marked.
    """
    from matplotlib.figure import Figure  # Agg canvas, no pyplot state

    panels = [(m, [(k, label) for k, label in CURVES[m] if history.get(k)],
               [(e["epoch"], e[m]) for e in evaluations if m in e and "epoch" in e])
              for m in CURVES]
    panels = [(m, keys, evaluated) for m, keys, evaluated in panels if keys or evaluated]
    if not panels:
        return None
    fig = Figure(figsize=(5.5 * len(panels), 3.6))
    for i, (metric, keys, evaluated) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for key, label in keys:
            points = [(e + 1, v) for e, v in enumerate(history[key]) if v is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                    label=label)
        if evaluated:
            ax.plot([p[0] for p in evaluated], [p[1] for p in evaluated], marker="s",
                    linestyle="--", label=EVALUATOR_LABEL)
        if kept_epoch is not None:
            ax.axvline(kept_epoch, color="#1f2933", linestyle=":",
                       label=f"kept: epoch {kept_epoch}")
        ax.set_title(metric)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    return png_data_uri(fig)
