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
    export_base: str = "",
    serving_model_name: str = "",
    min_improvement: float = 0.0,  # verdict.MIN_IMPROVEMENT (KFP embeds this source)
    allow_class_change: bool = False,  # verdict.ALLOW_CLASS_CHANGE (KFP embeds this source)
    run_name: str = "",
    rmse_threshold: float = 0.0,  # verdict.RMSE_THRESHOLD (KFP embeds this source)
) -> bool:
    """Evaluates a trained model on the held-out split and decides its blessing.

    The step's one parameter output is the verdict, for a pipeline's
    `dsl.If(evaluate.outputs["Output"] == True)` gate; the figures are in `metrics`.

    Args:
        model: Model written by `train_distributed`.
        dataset: The dataset the model was trained on; its `eval` split is used.
        metrics: Held-out accuracy, loss and example count; with `slice_columns`,
            also `accuracy[column=value]` and `eval_examples[column=value]` of
            each column's largest slices (every slice is in `report`). When a
            served model was compared: `served_accuracy`, `served_loss`,
            `accuracy_change`, `served_version` and `served_accuracy[column=value]`.
        classification_metrics: Confusion matrix over the eval split.
        report: HTML report: metrics, training curves, the confusion matrix and
            the slices' metrics, beside the served model's.
        summary: The same headline figures as Markdown, with the lowest-accuracy slices.
        blessing: The verdict: `blessed` is true when accuracy reaches the
            threshold and is not worse than the served model's by more than
            `min_improvement`; its metadata and file give the reason.
        accuracy_threshold: Minimum held-out accuracy, in [0, 1], for the model
            to be blessed (and exported).
        slice_columns: Columns of a table to slice the eval split by (TFMA's
            `SlicingSpec`): each value of a string column, or of a numeric column
            with few values, is a slice (else quantile bins); each slice's
            examples, accuracy and loss are reported. Empty: no slices.
        export_base: The export step's base (local path or gs://, s3:// or minio:// URI): the
            latest version of `serving_model_name` under it is the served model,
            scored on the same held-out split and slices. Empty: no comparison.
            A served model whose serving signature does not fit the dataset is
            named and not compared (the threshold alone decides); one that
            predicts other classes is not replaced (see `allow_class_change`).
        serving_model_name: The model's name in the serving layout.
        min_improvement: In [-1, 1]: how much more held-out accuracy than the
            served model's the new one needs to be blessed. 0: not worse;
            negative: a tolerance (-0.01: up to a point worse); -1: the
            threshold alone. Without a served model the threshold alone decides.
        allow_class_change: Let a model that predicts other classes than the
            served model (a class gained, lost or spelled another way) replace
            it, on the threshold alone. By default such a model is not blessed,
            and the reason names both models' classes.
        run_name: The pipeline run's name (the pipeline passes it); the report
            names it beside the data evaluated. Empty: the report names the data
            alone.
        rmse_threshold: For a regression's model (its dataset's label is a
            number): the highest held-out RMSE, in the label's units, for it to
            be blessed; 0 (the default): the RMSE of predicting the train
            split's mean label for every example. Such a model's `metrics` are
            `rmse`, `mae`, `r2`, `loss` (the MSE) and `rmse[column=value]` per
            slice; with a served model `served_rmse` and `rmse_change`; it is
            blessed when its RMSE is at most the threshold and, relative to the
            served model's, lower by at least `min_improvement` (0: not
            higher); its report plots the predictions against the labels and
            the residuals, and `classification_metrics` stays empty.

    Returns:
        Whether the model is blessed: its held-out accuracy reached the threshold
        and is not worse than the served model's by more than `min_improvement`.
    """
    import json

    from kfdist.components.common import model_artifact, process_exit
    from kfdist.components.evaluate_model import runtime, served_outputs

    process_exit.skip_final_collection()
    result = runtime.evaluate(model.path, dataset.path, accuracy_threshold=accuracy_threshold,
                              slice_columns=slice_columns or [], export_base=export_base,
                              serving_model_name=serving_model_name,
                              min_improvement=min_improvement,
                              allow_class_change=allow_class_change,
                              rmse_threshold=rmse_threshold)
    if result.task == "regression":
        from kfdist.components.evaluate_model import regression_outputs

        return regression_outputs.write(result, model.path, metrics, report, summary, blessing,
                                        run_name=run_name or None)
    for name, value in served_outputs.metric_values(result).items():
        metrics.log_metric(name, value)
    classification_metrics.log_confusion_matrix(result.class_names, result.confusion_matrix)
    with open(report.path, "w") as f:
        f.write(runtime.render_report_html(
            result, model_artifact.read_history(model.path),
            model_artifact.read_training_report(model.path), run_name=run_name or None))
    with open(summary.path, "w") as f:
        f.write(runtime.render_report_markdown(result))
    verdict = {"blessed": result.blessed, "reason": result.reason,
               "accuracy": result.accuracy, "threshold": result.threshold,
               **served_outputs.served_verdict(result)}
    with open(blessing.path, "w") as f:
        json.dump(verdict, f)
    blessing.metadata.update(verdict)
    return result.blessed
