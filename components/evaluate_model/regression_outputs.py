"""The evaluation step's outputs for a regression's model: metrics, report, summary, blessing.

`component.evaluate_model` hands a `RegressionEvaluation` here; its metrics are
logged as KFP Metrics (`regression_eval.metric_values`), the HTML report and the
Markdown summary are `regression_report`'s, and the blessing's file and metadata
carry `regression_eval.verdict_record`.
"""

from __future__ import annotations

import json
from typing import Optional

from kfdist.components.common import model_artifact
from kfdist.components.evaluate_model import regression_eval, regression_report


def write(result: regression_eval.RegressionEvaluation, model_dir: str, metrics, report,
          summary, blessing, run_name: Optional[str] = None) -> bool:
    """Writes the step's outputs and returns whether the model is blessed.

    Args:
      result: The evaluation.
      model_dir: The Model artifact's directory (its history and training report).
      metrics: The step's `dsl.Metrics` output.
      report: Its `dsl.HTML` output.
      summary: Its `dsl.Markdown` output.
      blessing: Its blessing artifact.
      run_name: The pipeline run's name, for the report; None: not named.
    """
    for name, value in regression_eval.metric_values(result).items():
        metrics.log_metric(name, value)
    with open(report.path, "w") as f:
        f.write(regression_report.render_regression_html(
            result, model_artifact.read_history(model_dir),
            model_artifact.read_training_report(model_dir), run_name=run_name))
    with open(summary.path, "w") as f:
        f.write(regression_report.render_regression_markdown(result))
    verdict = regression_eval.verdict_record(result)
    with open(blessing.path, "w") as f:
        json.dump(verdict, f)
    blessing.metadata.update({k: v for k, v in verdict.items() if v is not None})
    return result.blessed
