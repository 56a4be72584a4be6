"""KFP interface of `evaluate_model`; the work is done by `runtime.evaluate`."""

from typing import List, Optional

from kfp import dsl

from kfdist import RUNTIME_IMAGE


@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False)
def evaluate_model(
    model: dsl.Input[dsl.Model],
    dataset: dsl.Input[dsl.Dataset],
    metrics: dsl.Output[dsl.Metrics],
    classification_metrics: dsl.Output[dsl.ClassificationMetrics],
    report: dsl.Output[dsl.HTML],
    summary: dsl.Output[dsl.Markdown],
    blessing: dsl.Output[dsl.Artifact],
    accuracy_threshold: float = 0.9,
    slice_columns: Optional[List[str]] = None,
) -> bool:
    """Evaluates a trained model on the held-out split and decides its blessing.

    The step's one parameter output is the verdict, for a pipeline's
    `dsl.If(evaluate.outputs["Output"] == True)` gate; the figures are in `metrics`.

    Args:
        model: Model written by `train_distributed`.
        dataset: The dataset the model was trained on; its `eval` split is used.
        metrics: Held-out accuracy, loss and example count; with `slice_columns`,
            also `accuracy[column=value]` and `eval_examples[column=value]` of
            each column's largest slices (every slice is in `report`).
        classification_metrics: Confusion matrix over the eval split.
        report: HTML report: metrics, training curves, the confusion matrix and
            the slices' metrics.
        summary: The same headline figures as Markdown, with the lowest-accuracy slices.
        blessing: The verdict: `blessed` is true when accuracy reaches the
            threshold; its metadata and file give the reason.
        accuracy_threshold: Minimum held-out accuracy, in [0, 1], for the model
            to be blessed (and exported).
        slice_columns: Columns of a table to slice the eval split by (TFMA's
            `SlicingSpec`): each value of a string column, or of a numeric column
            with few values, is a slice (else quantile bins); each slice's
            examples, accuracy and loss are reported. Empty: no slices.

    Returns:
        Whether the model is blessed: its held-out accuracy reached the threshold.
    """
    import json

    from kfdist.components.common import model_artifact, process_exit
    from kfdist.components.evaluate_model import runtime, slices

    process_exit.skip_final_collection()
    result = runtime.evaluate(model.path, dataset.path, accuracy_threshold=accuracy_threshold,
                              slice_columns=slice_columns or [])
    metrics.log_metric("accuracy", result.accuracy)
    metrics.log_metric("loss", result.loss)
    metrics.log_metric("eval_examples", result.num_examples)
    for name, value in slices.metric_values(result.slices).items():
        metrics.log_metric(name, value)
    classification_metrics.log_confusion_matrix(result.class_names, result.confusion_matrix)
    with open(report.path, "w") as f:
        f.write(runtime.render_report_html(
            result, model_artifact.read_history(model.path),
            model_artifact.read_training_report(model.path)))
    with open(summary.path, "w") as f:
        f.write(runtime.render_report_markdown(result))
    verdict = {"blessed": result.blessed, "reason": result.reason,
               "accuracy": result.accuracy, "threshold": result.threshold}
    with open(blessing.path, "w") as f:
        json.dump(verdict, f)
    blessing.metadata.update(verdict)
    return result.blessed
