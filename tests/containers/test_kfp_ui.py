"""kfdist in the Kubeflow Pipelines UI, as a user meets it: KFP 2.17's own client and Node server
on the genuine node's bed, in front of its API server, object store and MLMD, driven in Debian's
Chromium.

`pipelines/mnist.yaml` is uploaded through the UI's upload page; the run form lists every
parameter with its default; a run started there with `backend=tfjob` trains as a TFJob on the
node: the graph shows kfdist's steps turning green, the training step's log grows while the
chief trains, and the outputs show: the evaluation's metrics, the confusion matrix the UI draws
from kfdist's ClassificationMetrics, the HTML report in the UI's viewer, the Markdown summary.
The tabular run that was not blessed (`test_kfp_on_the_bed`'s second) shows its export step not
run, and why, two clicks from the run's page, and its report's per-slice figures drawn within the
UI's side panel.

Screenshots go to a temporary directory, or to $KFDIST_UI_SCREENSHOTS: `docs/screenshots.sh`
regenerates the docs' images with these tests.
"""

import os
import re
import uuid

import pytest
import yaml

from cluster import kfp_ui
from containers.kfp_ui_browser import Browser
from containers.kfp_bed_runs import REPO, RUN_TIMEOUT_S
from containers.test_kfp_cluster_backends import check_trained

SCREENSHOTS_ENV = "KFDIST_UI_SCREENSHOTS"
MNIST_PACKAGE = REPO / "pipelines" / "mnist.yaml"
#: Enough for the log to be seen growing: each epoch of the sample takes a second or two.
EPOCHS = 20
#: kfdist's steps as the UI's graph names them (their display names), and the `dsl.If` group that
#: holds the export step.
STEPS = ("shard", "train", "evaluate")
BLESSED = "blessed"
GREEN = ("Complete", "Cached")


@pytest.fixture(scope="module")
def ui(node_bed, tmp_path_factory):
    """A browser at the bed's UI, saving its screenshots in $KFDIST_UI_SCREENSHOTS or a
    temporary directory."""
    shots = os.environ.get(SCREENSHOTS_ENV) or tmp_path_factory.mktemp("ui-screenshots")
    browser = Browser(kfp_ui.address(node_bed.root), shots)
    yield browser
    browser.quit()


def _parameters(package) -> dict:
    """{name: (default or None)} of the pipeline's parameters, from its compiled YAML."""
    spec = next(yaml.safe_load_all(package.read_text()))
    return {name: param.get("defaultValue")
            for name, param in spec["root"]["inputDefinitions"]["parameters"].items()}


def _node(ui, label: str):
    """The graph's node of task (or artifact) LABEL."""
    return ui.element(f"[title='{label}']")


def _node_state(ui, label: str) -> str:
    """The state icon a task's node shows: Complete, Running, Cached, Failed or '' (none)."""
    icons = {"CheckCircleIcon": "Complete", "RefreshIcon": "Running",
             "CloudDownloadIcon": "Cached", "ErrorIcon": "Failed"}
    from selenium.webdriver.common.by import By

    found = _node(ui, label).find_elements(By.CSS_SELECTOR, "svg[data-testid]")
    return next((icons[i.get_attribute("data-testid")] for i in found
                 if i.get_attribute("data-testid") in icons), "")


def _upload(ui, name: str) -> None:
    """Uploads mnist.yaml as pipeline NAME through the UI's upload page."""
    ui.go("/pipelines")
    ui.click_text("Upload pipeline", tag="button")
    ui.type_into("#newPipelineName", name)
    ui.click("#localPackageBtn")  # "Upload a file" (the page starts at "Import by url")
    ui.file_input().send_keys(str(MNIST_PACKAGE))
    # Looked up afresh each time: the form re-renders as the file is taken.
    create = ui.wait(lambda: (button := ui.element("#createNewPipelineOrVersionBtn")).is_enabled()
                     and button, "Create enabled")
    ui.shot("upload-pipeline")
    create.click()
    for step in (*STEPS, BLESSED):  # the pipeline's graph, with kfdist's step names
        _node(ui, step)
    ui.shot("pipeline-graph")


def _start_run(ui, experiment: str, values: dict) -> str:
    """From the pipeline's page, as KFP's UI leads a first run: creates EXPERIMENT, then fills
    the run form it opens with VALUES, starts the run and returns its id."""
    ui.click_text("Create experiment", tag="button")
    ui.type_into("#experimentName", experiment)
    ui.click("#createExperimentBtn")
    for name, default in _parameters(MNIST_PACKAGE).items():
        field = ui.element(f"input[id='{name}']")  # every parameter has its field
        if default is not None and not isinstance(default, (list, dict)):
            shown = field.get_attribute("value")
            assert shown == _as_form_text(default), (name, shown, default)
    ui.scroll_to(ui.with_text("Run parameters"))
    ui.shot("run-form")
    for name, value in values.items():
        ui.type_into(f"input[id='{name}']", str(value))
    ui.click("#startNewRunBtn")
    page = ui.wait(lambda: re.search(r"/runs/details/([0-9a-f-]{36})", ui.driver.current_url),
                   "the run's page")
    return page.group(1)


def _as_form_text(default) -> str:
    """How the run form shows a default: booleans and numbers as KFP's form writes them."""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def _logs(ui, task: str) -> str:
    """What the Logs tab of TASK's side panel shows ('' before its pod has a log), on the page
    loaded afresh: the UI reads the log as the tab opens."""
    ui.driver.refresh()
    _node(ui, task).click()
    ui.click_text("Logs", tag="button")
    shown = ui.wait(lambda: ui.elements("[data-testid='logs-view-window'], .MuiAlert-root, "
                                        "[class*='banner']"), "the log or why there is none")
    return shown[0].text if shown[0].get_attribute("data-testid") else ""


def test_mnist_uploaded_and_run_in_the_ui_trains_as_a_tfjob_and_shows_its_outputs(
        ui, node_bed, client, on_the_store):
    name = f"kfdist-mnist-{uuid.uuid4().hex[:6]}"
    _upload(ui, name)
    run_id = _start_run(ui, name, {"source_uri": on_the_store, "backend": "tfjob",
                                   "epochs": EPOCHS,
                                   "export_base": "minio://mlpipeline/serving-ui"})

    # While the chief trains, its epochs reach the step's log: the Logs tab (which reads the
    # log as it opens, and shows its end) shows a later epoch each time.
    def last_epoch() -> int:
        shown = re.findall(rf"\[worker-0\] epoch (\d+)/{EPOCHS}", _logs(ui, "train"))
        return max(map(int, shown), default=0)

    first = ui.wait(last_epoch, "the chief's first epoch in the training step's log",
                    RUN_TIMEOUT_S)
    ui.shot("training-log")
    later = ui.wait(lambda: (epoch := last_epoch()) > first and epoch, "a later epoch")
    assert first < later <= EPOCHS

    done = client.wait_for_run_completion(run_id, timeout=RUN_TIMEOUT_S)
    assert done.state == "SUCCEEDED", (done.state, done.error)
    ui.go(f"/runs/details/{run_id}")
    # Green: done, or (the shard step, when an earlier run sharded the same data) from KFP's cache.
    ui.wait(lambda: all(_node_state(ui, step) in GREEN for step in STEPS), "every step green")
    ui.shot("run-graph")

    check_trained(node_bed, run_id, "tfjob", epochs=EPOCHS, export_prefix="serving-ui/mnist/")
    _check_outputs(ui)


def _artifact(ui, task: str, name: str, expected: str) -> str:
    """Opens the Visualization tab of TASK's output artifact NAME (a node of the run's graph)
    and returns what it shows (an HTML artifact: the page in the UI's viewer) once that
    holds EXPECTED."""
    ui.close_panel()
    ui.click(f"span[id='artifact.{task}.{name}']")
    ui.click_text("Visualization", tag="button")

    def shown() -> str:
        frames = ui.elements("iframe")
        text = ui.frame_text(frames[0]) if frames else ui.text()
        return text if expected in text else ""

    return ui.wait(shown, f"{expected!r} in {name}'s visualization")


def _check_outputs(ui) -> None:
    """The evaluation's outputs, each in the UI's own viewer: its metrics table, the confusion
    matrix the UI draws from kfdist's ClassificationMetrics, the HTML report, the Markdown
    summary."""
    metrics = _artifact(ui, "evaluate-model", "metrics", "Scalar Metrics: metrics")
    accuracy = float(re.search(r"\naccuracy (\d\.\d+)\n", metrics).group(1))
    assert accuracy >= 0.9 and "eval_examples" in metrics, metrics[-800:]
    ui.shot("metrics")
    matrix = _artifact(ui, "evaluate-model", "classification_metrics",
                       "Confusion Matrix: classification_metrics")
    assert "True label" in matrix and "Predicted label" in matrix
    ui.shot("confusion-matrix")
    report = _artifact(ui, "evaluate-model", "report", "Model evaluation")
    assert "Blessed: accuracy" in report, report[:800]
    ui.shot("report")
    summary = _artifact(ui, "evaluate-model", "summary", "Static Markdown")
    assert "Blessed: accuracy" in summary, summary[-800:]


def test_a_run_that_is_not_blessed_shows_export_not_run_and_why(ui, tabular_runs):
    ui.go(f"/runs/details/{tabular_runs.unblessed}")
    for step in STEPS:
        ui.wait(lambda: _node_state(ui, step) in GREEN, f"{step} done")
    # The `blessed` group (which holds the export step) never ran: no state, never green.
    assert _node_state(ui, BLESSED) not in GREEN
    ui.shot("unblessed-run")
    # Why, in two clicks: the evaluation's summary, then its Visualization tab.
    summary = _artifact(ui, "evaluate-model", "summary", "Static Markdown")
    assert "Not blessed" in summary and "served version" in summary, summary[-800:]
    ui.shot("unblessed-why")
    # The per-slice figures (the run sliced wine by alcohol: five quantile bins), beside the
    # served model's, in the report the UI's viewer shows; every chart drawn in its sandbox.
    report = _artifact(ui, "evaluate-model", "report", "Slices")
    # A bin's row: slice, examples, accuracy, loss, vs all, the served model's accuracy, change.
    bins = re.findall(r"\[[\d.]+, [\d.]+[)\]]\s+\d+\s+[\d.]+%\s+[\d.]+\s+[+-][\d.]+ pp"
                      r"\s+[\d.]+%\s+[+-][\d.]+ pp", report)
    assert "\nalcohol\n" in report and len(bins) == 5, report[-1500:]
    [frame] = ui.elements("iframe")
    drawn = ui.frame_images(frame, "Slices")
    # Every chart drawn, and within the viewer's width (the side panel is narrower than a page).
    assert "accuracy by alcohol" in drawn, drawn
    assert all(0 < shown <= frame.size["width"] and natural for natural, shown in drawn.values()), (
        drawn, frame.size)
    ui.shot("unblessed-slices")
