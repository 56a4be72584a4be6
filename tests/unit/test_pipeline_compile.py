"""The committed pipeline YAML must match what the Python compiles to."""

import re

import pytest
import yaml

from kfdist.pipelines import registry

SDK_VERSION = re.compile(r"kfp-\d+\.\d+\.\d+\S*")


def _normalise(text: str) -> str:
    """Removes what depends on the installed SDK version, not on our code."""
    return SDK_VERSION.sub("kfp-SDK", text)


@pytest.mark.parametrize("name", sorted(registry.pipelines()))
def test_committed_yaml_matches_python(name, tmp_path):
    fresh = registry.compile_pipeline(name, str(tmp_path))
    committed = registry.compiled_path(name)
    with open(committed) as f:
        committed_text = f.read()
    with open(fresh) as f:
        fresh_text = f.read()
    assert _normalise(committed_text) == _normalise(fresh_text), (
        f"{committed} is out of date: run `kfdist compile --out-dir pipelines` and commit the result")


def test_normalisation_only_hides_sdk_version():
    a = "sdkVersion: kfp-2.13.0\nimage: x:1\n"
    assert _normalise(a) == _normalise(a.replace("2.13.0", "2.14.1"))
    assert _normalise(a) != _normalise(a.replace("x:1", "x:2"))


def _compiled_mnist():
    with open(registry.compiled_path("mnist")) as f:
        return tuple(yaml.safe_load_all(f))


def test_compiled_mnist_wires_the_dag():
    spec, platform = _compiled_mnist()
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"shard-dataset", "train-distributed", "evaluate-model", "condition-1"}
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["workers"]["defaultValue"] == 0  # the strategy's default
    assert params["restart_policy"]["defaultValue"] == ""  # the strategy's default
    assert "defaultValue" not in params["source_uri"]
    train_env = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][
        "exec-train-distributed"]["fieldPathAsEnv"]
    assert {e["name"] for e in train_env} == {"KFP_POD_NAME", "KFP_POD_UID", "KFP_POD_NAMESPACE"}
    train_inputs = tasks["train-distributed"]["inputs"]["parameters"]
    assert "run_id" in train_inputs and "task_name" in train_inputs
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert len(images) == 1 and not next(iter(images)).endswith(":latest")


def test_export_runs_only_under_the_blessing_condition():
    spec, _ = _compiled_mnist()
    gate = spec["root"]["dag"]["tasks"]["condition-1"]
    assert gate["taskInfo"]["name"] == "blessed"
    assert gate["dependentTasks"] == ["evaluate-model", "shard-dataset", "train-distributed"]
    assert gate["triggerPolicy"]["condition"] == (
        "inputs.parameter_values['pipelinechannel--evaluate-model-Output'] == true")
    inner = spec["components"]["comp-condition-1"]["dag"]["tasks"]
    assert set(inner) == {"export-saved-model"}
    from kfdist.pipelines.step_pods import CONDITIONAL_STEPS, STEP_NAMES

    assert CONDITIONAL_STEPS["condition-1"][0] == STEP_NAMES["export-saved-model"]
    assert "export-saved-model" not in spec["root"]["dag"]["tasks"]


def test_only_the_shard_step_is_cached():
    spec, _ = _compiled_mnist()
    tasks = dict(spec["root"]["dag"]["tasks"])
    tasks.update(spec["components"]["comp-condition-1"]["dag"]["tasks"])
    cached = {name for name, task in tasks.items()
              if task.get("cachingOptions", {}).get("enableCache")}
    assert cached == {"shard-dataset"}
    shard_inputs = tasks["shard-dataset"]["inputs"]["parameters"]
    assert shard_inputs["source_version"]["componentInputParameter"] == "source_version"


def test_every_step_pod_is_labelled_secured_and_kept_off_gpu_nodes():
    from kfdist.pipelines import step_pods

    _, platform = _compiled_mnist()
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(executors) == {f"exec-{task}" for task in step_pods.STEP_NAMES}
    for name, executor in executors.items():
        step = step_pods.STEP_NAMES[name[len("exec-"):]]
        assert executor["podMetadata"]["labels"] == {"app.kubernetes.io/part-of": "kfdist",
                                                     "kfdist.dev/step": step}
        assert executor["securityContext"] == {"runAsUser": "1000", "runAsGroup": "1000",
                                               "runAsNonRoot": True}
        [affinity] = executor["nodeAffinity"]
        assert affinity["matchExpressions"] == [{"key": "nvidia.com/gpu.present",
                                                 "operator": "DoesNotExist"}]
        assert 1 <= affinity["weight"] <= 100


def test_step_pods_reject_an_unknown_step():
    from kfp import dsl

    from kfdist.pipelines import step_pods

    with pytest.raises(ValueError, match=r"unknown step 'trian'; known steps: \['evaluate', "):
        step_pods.configure("mlpipeline-minio-artifact",
                            trian=dsl.PipelineTask.__new__(dsl.PipelineTask))


def test_evaluation_and_export_use_the_name_the_shard_step_resolves():
    spec, _ = _compiled_mnist()
    params = spec["root"]["inputDefinitions"]["parameters"]["serving_model_name"]
    assert params["defaultValue"] == ""  # after the data
    assert "after the data" in params["description"]
    assert "`mnist` when the data gives none" in params["description"]
    tasks = spec["root"]["dag"]["tasks"]
    shard = tasks["shard-dataset"]["inputs"]["parameters"]
    assert shard["serving_model_name"] == {"componentInputParameter": "serving_model_name"}
    assert shard["default_model_name"]["runtimeValue"]["constant"] == "mnist"
    resolved = {"outputParameterKey": "serving_model_name", "producerTask": "shard-dataset"}
    evaluate = tasks["evaluate-model"]["inputs"]["parameters"]["serving_model_name"]
    assert evaluate["taskOutputParameter"] == resolved
    gate = tasks["condition-1"]["inputs"]["parameters"]
    assert gate["pipelinechannel--shard-dataset-serving_model_name"]["taskOutputParameter"] == (
        resolved)
    export = spec["components"]["comp-condition-1"]["dag"]["tasks"]["export-saved-model"]
    assert export["inputs"]["parameters"]["serving_model_name"] == {
        "componentInputParameter": "pipelinechannel--shard-dataset-serving_model_name"}


@pytest.mark.parametrize("name", sorted(registry.pipelines()))
def test_every_step_gets_the_object_store_keys_from_the_pipelines_secret(name):
    with open(registry.compiled_path(name)) as f:
        spec, platform = tuple(yaml.safe_load_all(f))
    param = spec["root"]["inputDefinitions"]["parameters"]["object_store_secret"]
    assert param["defaultValue"] == "mlpipeline-minio-artifact"
    assert param["parameterType"] == "STRING"
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert len(executors) == 4
    for executor in executors.values():
        [secret_env] = executor["secretAsEnv"]
        assert secret_env["optional"] is True
        assert secret_env["keyToEnv"] == [
            {"envVar": "AWS_ACCESS_KEY_ID", "secretKey": "accesskey"},
            {"envVar": "AWS_SECRET_ACCESS_KEY", "secretKey": "secretkey"}]
        source = secret_env["secretNameParameter"]["componentInputParameter"]
        assert source in ("object_store_secret", "pipelinechannel--object_store_secret")
    gate_inputs = spec["root"]["dag"]["tasks"]["condition-1"]["inputs"]["parameters"]
    assert gate_inputs["pipelinechannel--object_store_secret"] == {
        "componentInputParameter": "object_store_secret"}
    train = spec["root"]["dag"]["tasks"]["train-program" if name == "program"
                                          else "train-distributed"]
    assert train["inputs"]["parameters"]["object_store_secret"] == {
        "componentInputParameter": "object_store_secret"}
