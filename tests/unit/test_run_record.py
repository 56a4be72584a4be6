"""The record a `kfdist run` leaves, failed or not: found from what kfp.local printed.

The text fed to the console has the shape kfp.local 2.17 prints (see
test_run_console.py): kfp's executor records, the executor input as JSON
(`json.dumps(..., indent=4)`, as `kfp.dsl.executor_main` logs it), then the
step's own lines, all indented by 4. tests/e2e/test_run_failure.py runs the
real thing.
"""

from __future__ import annotations

import io
import json
import sys

import pytest

from kfdist import run_record
from kfdist.local_run import RunOptions
from kfdist.run_console import RunConsole

RUN = "kfdist-tabular-2026-11-28-06-03-04-073170"


def _executor_input(root, task: str, inputs=None, outputs=None) -> dict:
    def artifacts(names, kind):
        return {name: {"artifacts": [{"name": name, "type": {"schemaTitle": f"system.{kind}"},
                                      "uri": uri, "metadata": {}}]}
                for name, uri in (names or {}).items()}

    return {"inputs": {"parameterValues": {"source_uri": "wine.csv"},
                       "artifacts": artifacts(inputs, "Dataset")},
            "outputs": {"artifacts": artifacts(outputs, "HTML"),
                        "outputFile": f"{root}/{RUN}/{task}/executor_output.json"}}


def _started(task: str, executor_input: dict, own: list) -> list:
    record = "[KFP Executor 2026-11-28 06:03:04,359 INFO]: "
    return [f"00:02:42.100 - INFO - Executing task '{task}'",
            "00:02:42.100 - INFO - Streamed logs:", "",
            f"    {record}Looking for component `x` in --component_module_path `/tmp/c.py`",
            f"    {record}Got executor_input:",
            *[f"    {line}" for line in json.dumps(executor_input, indent=4).splitlines()],
            *[f"    {line}" for line in own]]


def _failed(task: str) -> list:
    return [f"00:02:47.000 - ERROR - Task '{task}' finished with status FAILURE",
            "Skipping task train-distributed: upstream task(s) ['shard-dataset'] failed."]


def _console(lines: list, tmp_path) -> RunConsole:
    with RunConsole(str(tmp_path / "logs"), out=io.StringIO()) as console:
        sys.stdout.write("\n".join(lines) + "\n")
    return console


def _stopped_shard(tmp_path, report: bool = True) -> RunConsole:
    step_dir = tmp_path / "pipeline_root" / RUN / "shard-dataset"
    step_dir.mkdir(parents=True)
    if report:
        (step_dir / "data_report").write_text("<h1>Data validation</h1> column 'proline'")
    own = ["source wine.csv: csv, 1 file", "anomaly: column 'proline' is missing",
           "Traceback (most recent call last):", '  File "x.py", line 1, in shard',
           "kfdist.components.shard_dataset.validation.DataAnomalyError: 1 anomaly in the data"]
    executor_input = _executor_input(tmp_path / "pipeline_root", "shard-dataset", outputs={
        "data_report": str(step_dir / "data_report"), "dataset": str(step_dir / "dataset")})
    return _console(_started("shard-dataset", executor_input, own) + _failed("shard-dataset"),
                    tmp_path)


def test_a_failed_steps_last_lines_start_at_its_own_not_at_the_executor_input(tmp_path):
    console = _stopped_shard(tmp_path)
    assert console.tail("shard") == ["source wine.csv: csv, 1 file",
                                     "anomaly: column 'proline' is missing",
                                     "DataAnomalyError: 1 anomaly in the data"]
    assert '"outputFile"' in (tmp_path / "logs" / "shard.log").read_text()  # the log keeps it


def test_a_failed_run_is_recorded_with_its_id_steps_error_and_data_report(tmp_path):
    from kfdist.pipelines import registry

    console = _stopped_shard(tmp_path)
    failure = run_record.step_failure(console, RuntimeError("Pipeline failed"))
    assert failure.step == "shard" and failure.error == "DataAnomalyError: 1 anomaly in the data"
    out = tmp_path / "out"
    out.mkdir()
    summary = run_record.failed_summary(
        RunOptions(output_dir=str(out), pipeline="tabular", source_uri="data/wine.csv"),
        failure, console, registry.get_pipeline("tabular"), source_uri="data/wine.csv",
        export_base=str(out / "serving"), output_dir=str(out), wall_seconds=3.14159,
        data_report=run_record.publish_data_report(console, str(out)))
    path = run_record.write_summary(summary, str(out))
    with open(path) as f:
        written = json.load(f)
    assert written["status"] == "failed" and written["run_id"] == RUN
    assert written["steps"] == {"shard": "failed", "train": "not run", "evaluate": "not run",
                                "export": "not run"}
    assert written["failure"]["step"] == "shard"
    assert written["failure"]["error"] == "DataAnomalyError: 1 anomaly in the data"
    assert written["failure"]["log"] == str(tmp_path / "logs" / "shard.log")
    assert "anomaly: column 'proline' is missing" in written["failure"]["last_lines"]
    assert written["data_report"] == str(out / "data_report.html")
    assert "column 'proline'" in (out / "data_report.html").read_text()
    assert written["blessed"] is False and written["export"]["exported"] is False
    assert written["model_name"] == "wine" and written["wall_seconds"] == 3.14
    shown = run_record.format_failure(written).splitlines()
    assert shown == [f"data report: {out / 'data_report.html'}",
                     f"failed after 3.1s; summary: {path}; every step's log: {out / 'logs'}/"]


def test_without_a_page_the_summary_names_no_data_report(tmp_path):
    console = _stopped_shard(tmp_path, report=False)
    assert run_record.publish_data_report(console, str(tmp_path)) is None
    assert not (tmp_path / "data_report.html").exists()


def test_a_cached_shard_steps_page_is_found_in_the_dataset_a_later_step_read(tmp_path):
    dataset = tmp_path / "earlier-run" / "shard-dataset" / "dataset"
    dataset.mkdir(parents=True)
    (dataset / "data_validation.html").write_text("<h1>Data validation</h1>")
    lines = ["Task shard-dataset cache hit (key=1fef3edc32fe); skipping execution.",
             *_started("train-distributed", _executor_input(
                 tmp_path / "pipeline_root", "train-distributed",
                 inputs={"dataset": str(dataset)}), ["[worker-0] epoch 1/1"]),
             "00:02:47.000 - INFO - Task 'train-distributed' finished with status SUCCESS"]
    console = _console(lines, tmp_path)
    assert run_record.run_id(console) == RUN
    published = run_record.publish_data_report(console, str(tmp_path))
    assert published == str(tmp_path / "data_report.html")
    assert (tmp_path / "data_report.html").read_text() == "<h1>Data validation</h1>"


def test_a_run_that_never_started_a_step_has_no_id(tmp_path):
    console = _console(["00:02:42.000 - INFO - Running pipeline: 'kfdist-tabular'"], tmp_path)
    assert run_record.run_id(console) is None


def test_a_given_serving_name_wins_and_the_sample_is_named_after_its_table(tmp_path,
                                                                          monkeypatch):
    from kfdist.serving_name import serving_line

    given = RunOptions(output_dir=str(tmp_path), pipeline="tabular", source_uri="d/wine.csv",
                       serving_model_name="wine-v2")
    assert given.serving_name == "wine-v2"
    assert serving_line(given, "/s") == "serving name: wine-v2 (--serving-model-name), under /s"
    sample = RunOptions(output_dir=str(tmp_path), pipeline="tabular")
    assert sample.serving_name == "penguins"
    assert serving_line(sample, "/s") == ("serving name: penguins (after the data; "
                                          "--serving-model-name sets another), under /s")
    (tmp_path / "Wine Data").mkdir()
    monkeypatch.chdir(tmp_path / "Wine Data")
    split_file = RunOptions(output_dir=str(tmp_path), pipeline="tabular", source_uri="train.csv")
    assert split_file.serving_name == "wine-data"


def test_counts_agree_with_their_nouns(tmp_path):
    from kfdist.components.common.wording import counted
    from kfdist.run_summary import headline

    assert [counted(1, "epoch"), counted(30.0, "epoch"), counted(1797, "example")] == [
        "1 epoch", "30 epochs", "1,797 examples"]
    one = RunOptions(output_dir=str(tmp_path), pipeline="tabular",
                     training={"epochs": 1, "workers": 1, "strategy": "multi_worker_mirrored"})
    assert headline(one, "/out") == ("kfdist run tabular: multi_worker_mirrored, 1 worker, "
                                      "1 epoch of the data's default model -> /out")


def test_the_report_names_its_run_and_data_and_what_its_time_is():
    from kfdist.components.common.model_artifact import ReplicaReport, TrainingReport
    from kfdist.components.evaluate_model.report import render_report_html
    from kfdist.components.evaluate_model.runtime import EvaluationResult

    result = EvaluationResult(accuracy=0.97, loss=0.1, num_examples=36,
                              confusion_matrix=[[20, 1], [0, 15]], class_names=["a", "b"],
                              blessed=True, reason="accuracy 0.972 >= threshold 0.900",
                              threshold=0.9, data_source="gs://tables/wine.csv")
    training = TrainingReport(backend="local", strategy="mirrored", workers=1, model_name="m",
                              epochs=1, final_loss=0.2, final_accuracy=0.9,
                              examples_per_second=900.0, wall_seconds=24.8,
                              replicas=[ReplicaReport("worker:0", 1, 1, "0" * 64)])
    page = render_report_html(result, {}, training, run_name=RUN)
    assert f"<p>run <b>{RUN}</b> · data <b>gs://tables/wine.csv</b></p>" in page
    assert ("<td>time in model.fit</td><td>24.8 s (the training step&#x27;s start-up and "
            "saving not included)</td>") in page


def test_a_run_that_failed_after_its_evaluation_keeps_the_report(tmp_path):
    from kfdist.pipelines import registry

    evaluated = tmp_path / "pipeline_root" / RUN / "evaluate-model"
    evaluated.mkdir(parents=True)
    (evaluated / "report").write_text("<h1>Model evaluation</h1>")
    root = tmp_path / "pipeline_root"
    lines = [*_started("evaluate-model", _executor_input(
                 root, "evaluate-model", outputs={"report": str(evaluated / "report")}), []),
             "00:02:45.000 - INFO - Task 'evaluate-model' finished with status SUCCESS",
             *_started("export-saved-model", _executor_input(root, "export-saved-model"),
                       ["PermissionError: gs://models/serving is not writable"]),
             "00:02:47.000 - ERROR - Task 'export-saved-model' finished with status FAILURE"]
    console = _console(lines, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    failure = run_record.step_failure(console, RuntimeError("Pipeline failed"))
    summary = run_record.failed_summary(
        RunOptions(output_dir=str(out), pipeline="mnist"), failure, console,
        registry.get_pipeline("mnist"), source_uri="d", export_base="gs://models/serving",
        output_dir=str(out), wall_seconds=9.0, data_report=None,
        report=run_record.publish_evaluation_report(console, str(out)))
    assert summary["report"] == str(out / "report.html")
    assert (out / "report.html").read_text() == "<h1>Model evaluation</h1>"
    assert summary["steps"]["evaluate"] == "succeeded" and summary["steps"]["export"] == "failed"
    assert summary["failure"]["error"] == "PermissionError: gs://models/serving is not writable"
    assert f"evaluation report: {out / 'report.html'}" in run_record.format_failure(summary)
