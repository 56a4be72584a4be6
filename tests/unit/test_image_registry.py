"""Pipelines and jobs pointed at another registry: `--registry`/`--tag` of compile, render, submit.

A pipeline compiled with `--registry R --tag T` names no image but `R/kfdist-*:T` anywhere in
its YAML, and its steps carry R and T to the training step, whose replicas then default to
`R/kfdist-runtime:T` or `R/kfdist-horovod:T`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kfdist
from kfdist import cli, images
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

REPO = Path(__file__).resolve().parents[2]
REGISTRY, TAG = "registry.example.com:5000/ml-platform", "2.0.0-rc1"
KFDIST = [sys.executable, "-m", "kfdist"]
#: An image reference wherever it is in a YAML text: host/path/kfdist-<name>:<tag>.
IMAGE_REF = re.compile(r"[\w.:-]+(?:/[\w.-]+)*/kfdist-[a-z-]+:[\w.-]+")


def _kfdist(*args, cwd=None):
    return subprocess.run(KFDIST + list(args), capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _strings(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every shipped pipeline compiled with --registry and --tag (the real CLI)."""
    out = tmp_path_factory.mktemp("compiled")
    result = _kfdist("compile", "--registry", REGISTRY, "--tag", TAG, "--out-dir", str(out))
    assert result.returncode == 0, result.stderr
    return {path.stem: path for path in out.glob("*.yaml")}


def test_every_pipeline_names_only_the_registrys_images(compiled):
    assert set(compiled) == set(kfdist_pipelines())
    for name, path in compiled.items():
        text = path.read_text()
        assert "ghcr.io" not in text, name
        documents = list(yaml.safe_load_all(text))
        found = {ref for s in _strings(documents) for ref in IMAGE_REF.findall(s)}
        executors = documents[0]["deploymentSpec"]["executors"]
        step_images = {e["container"]["image"] for e in executors.values()}
        assert step_images == {f"{REGISTRY}/kfdist-runtime:{TAG}"}, name
        assert found and all(ref.startswith(f"{REGISTRY}/kfdist-") and ref.endswith(f":{TAG}")
                             for ref in found), (name, found)
        # Every step carries the registry to the training step's replica defaults.
        for executor in executors.values():
            env = {e["name"]: e["value"] for e in executor["container"]["env"]}
            assert env[images.REGISTRY_ENV] == REGISTRY and env[images.TAG_ENV] == TAG


def test_without_registry_the_yaml_is_the_shipped_one(tmp_path):
    result = _kfdist("compile", "--out-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    for path in tmp_path.glob("*.yaml"):
        assert path.read_text() == (REPO / "pipelines" / path.name).read_text(), path.name


def test_retarget_keeps_the_compilers_layout_and_header():
    text = (REPO / "pipelines" / "mnist.yaml").read_text()
    retargeted = images.retarget_pipeline(text, REGISTRY, TAG)
    assert retargeted.splitlines()[:20] == text.splitlines()[:20]  # the header comment block
    changed = [(a, b) for a, b in zip(text.splitlines(), retargeted.splitlines()) if a != b]
    assert changed and all("image:" in a or "env:" in b for a, b in changed[:1])
    # Retargeting again (another registry) replaces the env, not appends to it.
    again = next(yaml.safe_load_all(images.retarget_pipeline(retargeted, "other.example.com", "3")))
    for executor in again["deploymentSpec"]["executors"].values():
        names = [e["name"] for e in executor["container"]["env"]]
        assert names.count(images.REGISTRY_ENV) == 1


def test_the_step_env_sets_the_replicas_default_images(monkeypatch):
    options = ClusterOptions()
    assert options.image_for("horovod") == kfdist.HOROVOD_IMAGE
    assert options.image_for("multi_worker_mirrored") == kfdist.RUNTIME_IMAGE
    monkeypatch.setenv(images.REGISTRY_ENV, REGISTRY)
    monkeypatch.setenv(images.TAG_ENV, TAG)
    assert options.image_for("horovod") == f"{REGISTRY}/kfdist-horovod:{TAG}"
    assert options.image_for("parameter_server") == f"{REGISTRY}/kfdist-runtime:{TAG}"
    assert ClusterOptions(image="mine:1").image_for("horovod") == "mine:1"


@pytest.mark.parametrize("backend,strategy,image", [
    ("tfjob", "multi_worker_mirrored", "runtime"), ("mpijob", "horovod", "horovod"),
    ("trainjob", "horovod", "horovod")])
def test_render_uses_the_registry(backend, strategy, image):
    result = _kfdist("render", "--backend", backend, "--strategy", strategy, "--workers", "2",
                     "--namespace", "ml", "--work-uri", "gs://bucket/work",
                     "--registry", REGISTRY, "--tag", TAG)
    assert result.returncode == 0, result.stderr
    body = yaml.safe_load(result.stdout)
    found = set(IMAGE_REF.findall(result.stdout))
    assert found == {f"{REGISTRY}/kfdist-{image}:{TAG}"}, found
    if backend == "mpijob":  # the registry's Horovod image is kfdist's: the keys go to mpiuser
        assert body["spec"]["sshAuthMountPath"] == kfdist.HOROVOD_IMAGE_SSH_DIR


@pytest.mark.parametrize("registry,tag,bad", [
    ("Registry.Example.com/ml", None, "'Registry.Example.com/ml'"),
    ("registry example", None, "'registry example'"),
    (None, "-rc1", "'-rc1'"),
    (None, "a" * 129, "'" + "a" * 129 + "'")])
def test_bad_registry_or_tag_is_refused_before_anything_is_written(tmp_path, registry, tag, bad):
    args = ["compile", "--out-dir", str(tmp_path / "out")]
    args += ["--registry", registry] if registry is not None else []
    args += [f"--tag={tag}"] if tag is not None else []
    result = _kfdist(*args)
    assert result.returncode == 2
    assert result.stderr.count("kfdist: invalid input:") == 1 and bad in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_image_refuses_an_unknown_name():
    with pytest.raises(InvalidInputError, match="'gpu'.*runtime"):
        images.image("gpu")


def kfdist_pipelines():
    from kfdist.pipelines import registry

    return registry.pipelines()


def test_kfdist_images_are_recognised_in_any_registry_with_any_tag():
    from kfdist.images import is_kfdist_image, kfdist_image_name

    assert kfdist_image_name("registry.example.com:5000/ml/kfdist-horovod:0.2.0") == "horovod"
    assert kfdist_image_name("ghcr.io/kfdist/kfdist-runtime@sha256:" + "0" * 64) == "runtime"
    assert kfdist_image_name("ghcr.io/team/kfdist-horovod-extra:1") is None
    assert kfdist_image_name("ghcr.io/team/trainer:1") is None
    assert is_kfdist_image("kfdist-training-gpu:1") and not is_kfdist_image("python:3.11")


# --------------------------------------------------------------- kfdist run --registry/--tag


def _run_options(*flags):
    """The options `kfdist run mnist FLAGS` runs with (parsed by the real CLI, nothing run)."""
    return cli.run_options(cli.build_parser().parse_args(["run", "mnist", *flags]))


def _step_env(pipeline) -> list:
    from google.protobuf import json_format

    executors = json_format.MessageToDict(pipeline.pipeline_spec.deployment_spec)["executors"]
    return [{e["name"]: e["value"] for e in executor["container"].get("env", [])}
            for executor in executors.values()]


def test_run_with_the_docker_runner_runs_the_steps_in_the_registrys_image():
    from kfdist import local_run

    opts = _run_options("--runner", "docker", "--registry", REGISTRY, "--tag", TAG)
    pipeline = local_run.pipeline_to_run(opts)
    # The images DockerRunner starts (and docker_runner pulls first) are the registry's...
    assert local_run.step_images(pipeline) == (f"{REGISTRY}/kfdist-runtime:{TAG}",)
    # ...and every step carries the registry to the training step's replica images.
    assert all(env[images.REGISTRY_ENV] == REGISTRY and env[images.TAG_ENV] == TAG
               for env in _step_env(pipeline))
    # A tag alone keeps the published registry.
    tagged = local_run.pipeline_to_run(_run_options("--runner", "docker", "--tag", TAG))
    assert local_run.step_images(tagged) == (f"{kfdist.DEFAULT_REGISTRY}/kfdist-runtime:{TAG}",)
    # Without them: the published image, as before.
    shipped = local_run.pipeline_to_run(_run_options("--runner", "docker"))
    assert local_run.step_images(shipped) == (kfdist.RUNTIME_IMAGE,)


def test_a_missing_image_names_the_build_command_for_its_registry_and_tag():
    assert images.build_command(f"{REGISTRY}/kfdist-runtime:{TAG}") == (
        f"bash containers/build.sh --registry {REGISTRY} --tag {TAG} runtime")
    assert images.build_command(kfdist.RUNTIME_IMAGE) == "bash containers/build.sh runtime"


def test_run_refuses_registry_where_no_image_runs(tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["run", "mnist", "--output", str(out), "--registry", REGISTRY, "--tag", TAG])
    err = capsys.readouterr().err
    assert rc == 2
    [line] = [line for line in err.splitlines() if line.startswith("kfdist:")]
    assert line.startswith("kfdist: invalid input: --registry/--tag") and "--runner docker" in line
    assert "Traceback" not in err and not out.exists()


def test_run_takes_registry_for_a_cluster_backends_replicas():
    from kfdist.run_checks import validate_run_options

    opts = _run_options("--backend", "tfjob", "--namespace", "ml", "--work-uri", "gs://b/w",
                        "--registry", REGISTRY)
    validate_run_options(opts)  # the subprocess steps' training step starts the registry's replicas
    assert opts.images == (REGISTRY, None)


def test_run_warns_of_gpus_for_the_cpu_runtime_image():
    from kfdist.run_checks import run_warnings

    cluster = ("--backend", "tfjob", "--namespace", "ml", "--work-uri", "gs://b/w")
    [warning] = run_warnings(_run_options(*cluster, "--gpus-per-worker", "2",
                                          "--registry", REGISTRY, "--tag", TAG))
    assert "--gpus-per-worker 2" in warning and f"{REGISTRY}/kfdist-runtime:{TAG}" in warning
    assert f"--image {REGISTRY}/kfdist-training-gpu:{TAG}" in warning and "\n" not in warning
    gpu_image = f"{REGISTRY}/kfdist-training-gpu:{TAG}"
    assert run_warnings(_run_options(*cluster, "--gpus-per-worker", "2", "--image", gpu_image)) == []
    assert run_warnings(_run_options(*cluster)) == []
