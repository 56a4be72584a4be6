"""`kfdist submit`'s options against Kubeflow Pipelines 2.17's real API server on the genuine
node's bed: without `--wait` it returns once the run exists (in KFP's `Default` experiment); an
`--experiment` is created when missing and reused after, a user's existing one reused; the
`--param` values reach the step typed as the pipeline declares them; `--timeout` exits 3 and
leaves the run going; with `--registry` and `--tag` the run the server holds names that
registry's image in every step. (Its outcomes, a refused pipeline and an unreachable host:
`test_kfp_on_the_bed`.)
"""

import json
import subprocess
import uuid
from pathlib import Path

from containers.kfp_bed_runs import REPO, RUN_TIMEOUT_S, _submit
from containers.test_kfp_on_the_bed import _poll, run_of, step_log, step_pods
from kfdist.submit import EXIT_TIMEOUT

#: How long the test pipeline's step sleeps: longer than the test, which terminates its runs.
SLEEP_S = 900


def _typed_pipeline(path: Path, image: str, name: str) -> Path:
    """Compiles a one-step pipeline on `image` whose step prints its typed parameters, then
    sleeps `seconds`."""
    from kfp import compiler, dsl

    @dsl.component(base_image=image, install_kfp_package=False)
    def typed(seconds: int, rate: float, text: str):
        import time

        print(f"typed {seconds!r} {rate!r} {text!r}", flush=True)
        time.sleep(seconds)

    @dsl.pipeline(name=name)
    def typed_pipeline(seconds: int = 1, rate: float = 0.5, text: str = "x"):
        typed(seconds=seconds, rate=rate, text=text)

    compiler.Compiler().compile(typed_pipeline, str(path))
    return path


def _ended(process: subprocess.Popen) -> tuple:
    """The submit's exit status and its result (the last line of its output, as JSON)."""
    out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    return process.returncode, json.loads(out.splitlines()[-1]) if out.strip() else None, err


def _experiments_named(client, name: str) -> list:
    found = client.list_experiments(filter=json.dumps({"predicates": [
        {"key": "display_name", "operation": "EQUALS", "string_value": name}]})).experiments
    return [e.experiment_id for e in found or ()]


def test_submit_without_wait_timeout_experiments_and_typed_params_on_the_real_server(
        node_bed, client, kfp_host, kfdist_images, tmp_path):
    package = _typed_pipeline(tmp_path / "typed.yaml", kfdist_images["runtime"],
                              f"submit-options-{uuid.uuid4().hex[:8]}")
    nightly, existing = (f"{what}-{uuid.uuid4().hex[:8]}" for what in ("nightly", "ci"))
    existing_id = client.create_experiment(existing).experiment_id
    params = ("--param", f"seconds={SLEEP_S}")
    runs = []
    try:
        code, created, err = _ended(_submit(kfp_host, package, *params))
        assert (code, created and created["state"]) == (0, "PENDING"), err
        runs.append(created["run_id"])
        assert f"run {created['run_id']} created (PENDING): {created['url']}" in err
        default = client.get_run(created["run_id"]).experiment_id
        assert client.get_experiment(experiment_id=default).display_name == "Default"

        for experiment in (nightly, nightly, existing):
            code, result, err = _ended(_submit(kfp_host, package, *params,
                                               "--experiment", experiment))
            assert code == 0, err
            runs.append(result["run_id"])
        assert len(_experiments_named(client, nightly)) == 1  # created once, then reused
        assert _experiments_named(client, existing) == [existing_id]
        in_nightly = {client.get_run(run).experiment_id for run in runs[1:3]}
        assert in_nightly == set(_experiments_named(client, nightly))
        assert client.get_run(runs[3]).experiment_id == existing_id

        waiting = _submit(kfp_host, package, *params, "--param", "rate=0.25", "--param",
                          "text=7", "--wait", "--timeout", "20")
        code, result, err = _ended(waiting)
        assert code == EXIT_TIMEOUT == 3, err
        runs.append(result["run_id"])
        assert "timed out after 20s waiting; it is" in err and "keeps going" in err, err
        assert client.get_run(result["run_id"]).state in ("PENDING", "RUNNING")  # left going
        pod = _poll(lambda: next(iter(step_pods(node_bed, result["run_id"], "typed")),
                                 None), RUN_TIMEOUT_S, "the typed step's pod")
        _poll(lambda: f"typed {SLEEP_S} 0.25 '7'" in step_log(node_bed, pod),
              RUN_TIMEOUT_S, "the typed step's parameters in its log")
        assert run_of(client, package) == result["run_id"]
    finally:
        for run in runs:
            client.terminate_run(run)


def test_submit_with_a_registry_runs_the_pipeline_retargeted_to_it(node_bed, client, kfp_host):
    registry, tag = "registry.example.com:5000/ml-platform", "2.0.0-rc1"
    code, result, err = _ended(_submit(
        kfp_host, REPO / "pipelines" / "mnist.yaml", "--param",
        "source_uri=minio://mlpipeline/data/none", "--param", "export_base=minio://mlpipeline/none",
        "--registry", registry, "--tag", tag))
    assert code == 0, err
    try:
        spec = client.get_run(result["run_id"]).pipeline_spec
        spec = spec.get("pipeline_spec", spec)
        assert {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()} \
            == {f"{registry}/kfdist-runtime:{tag}"}
    finally:
        client.terminate_run(result["run_id"])
