"""What `kfdist render` says beside the job: where its name comes from (and `--name` for another),
that its `job.json` is not at the work location without `--stage`, and GPUs asked for a CPU image.

Through the real CLI's entry point, in-process: nothing reaches a cluster or a bucket.
"""

from __future__ import annotations

import pytest
import yaml

import kfdist
from kfdist import cli
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for

TFJOB = ["render", "--backend", "tfjob", "--namespace", "team-a", "--work-uri", "gs://b/jobs/x"]


def _render(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out, yaml.safe_load(out), err


def _container(body) -> dict:
    [container] = body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return container


def test_the_default_name_says_how_it_is_made_in_a_yaml_comment(capsys):
    out, body, _ = _render(capsys, *TFJOB)
    name = job_name_for("manual", "train-distributed")
    assert body["metadata"]["name"] == name
    comment = [line for line in out.splitlines() if line.startswith("#")]
    assert out.startswith("# ") and comment and name in comment[0]
    text = " ".join(comment)
    assert "--run-id 'manual'" in text and "--task-name 'train-distributed'" in text
    assert "--name" in text


def test_name_gives_the_job_and_its_default_work_location_their_own_name(capsys):
    out, body, _ = _render(capsys, "render", "--backend", "tfjob", "--namespace", "team-a",
                           "--dataset-uri", "gs://b/runs/1/dataset", "--name", "mnist-try-2")
    assert body["metadata"]["name"] == "mnist-try-2"
    assert _container(body)["command"][-2:] == ["--work-uri", "gs://b/runs/1/mnist-try-2"]
    assert not out.startswith("#")


@pytest.mark.parametrize("name", ["Mnist", "2nd-try", "a.b", "x" * 64, "trailing-"])
def test_name_that_is_no_job_name_is_one_usage_line(capsys, name):
    with pytest.raises(SystemExit) as exit:
        cli.main([*TFJOB, "--name", name])
    err = capsys.readouterr().err
    assert exit.value.code == 2
    [line] = err.splitlines()
    assert line.startswith("kfdist: invalid input: argument --name: ") and repr(name) in line
    assert "DNS-1035 label" in line


def test_without_stage_a_note_says_job_json_is_not_at_the_work_location(capsys):
    _, _, err = _render(capsys, *TFJOB)
    [note] = [line for line in err.splitlines() if "job.json" in line]
    assert "gs://b/jobs/x/job.json" in note and "--stage" in note and "training step" in note
    assert note.startswith("# ")  # `2>&1 | kubectl apply -f -` still reads YAML


@pytest.mark.parametrize("extra, named", [
    ([], kfdist.RUNTIME_IMAGE),
    (["--registry", "registry.example.com/ml", "--tag", "dev"],
     "registry.example.com/ml/kfdist-runtime:dev"),
])
def test_gpus_for_the_cpu_runtime_image_warn_naming_the_gpu_image(capsys, extra, named):
    _, body, err = _render(capsys, *TFJOB, "--gpus-per-worker", "2", *extra)
    assert _container(body)["image"] == named
    [warning] = [line for line in err.splitlines() if "GPU" in line]
    gpu_image = named.replace("kfdist-runtime", "kfdist-training-gpu")
    assert "--gpus-per-worker 2" in warning and f"--image {gpu_image}" in warning


def test_gpus_with_the_gpu_image_or_no_gpus_do_not_warn(capsys):
    gpu_image = f"{kfdist.DEFAULT_REGISTRY}/kfdist-training-gpu:{kfdist.__version__}"
    for extra in (["--gpus-per-worker", "2", "--image", gpu_image], []):
        _, _, err = _render(capsys, *TFJOB, *extra)
        assert "GPU" not in err, err
