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
        f"{committed} is out of date: run `kfdist compile` and commit the result")


def test_normalisation_only_hides_sdk_version():
    a = "sdkVersion: kfp-2.13.0\nimage: x:1\n"
    assert _normalise(a) == _normalise(a.replace("2.13.0", "2.14.1"))
    assert _normalise(a) != _normalise(a.replace("x:1", "x:2"))


def test_compiled_mnist_wires_the_dag():
    with open(registry.compiled_path("mnist")) as f:
        spec, platform = yaml.safe_load_all(f)
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"shard-dataset", "train-distributed", "evaluate-model", "export-saved-model"}
    assert tasks["export-saved-model"]["dependentTasks"] == ["evaluate-model", "train-distributed"]
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["workers"]["defaultValue"] == 2
    assert "defaultValue" not in params["source_uri"]
    train_env = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][
        "exec-train-distributed"]["fieldPathAsEnv"]
    assert {e["name"] for e in train_env} == {"KFP_POD_NAME", "KFP_POD_UID", "KFP_NAMESPACE"}
    train_inputs = tasks["train-distributed"]["inputs"]["parameters"]
    assert "run_id" in train_inputs and "task_name" in train_inputs
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert len(images) == 1 and not next(iter(images)).endswith(":latest")
