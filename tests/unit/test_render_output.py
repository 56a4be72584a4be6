"""What `kfdist render` says beside the job: where its name comes from (and `--name` for another),
that its `job.json` is not at the work location without `--stage`, and GPUs asked for a CPU image.

Through the real CLI's entry point, in-process: nothing reaches a cluster or a bucket.
"""

from __future__ import annotations

import pytest
import yaml

import kfdist
from kfdist import cli, render_cmd
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for
from kfdist.yaml_text import to_yaml

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


def test_every_setting_a_cluster_job_lacks_is_named_in_one_line(capsys, monkeypatch):
    monkeypatch.delenv("KFP_POD_NAMESPACE", raising=False)
    assert cli.main(["render"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("kfdist: invalid input: ")
    for said in ("pass --backend tfjob or mpijob or trainjob, not 'local'", "pass --namespace",
                 "pass --work-uri (gs://BUCKET/PREFIX, s3://BUCKET/PREFIX, or a path on the PVC "
                 "named by --pvc-name)"):
        assert said in line, line
    assert cli.main(["render", "--backend", "tfjob", "--work-uri", "/data/x"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "pass --namespace" in line and "pass --pvc-name as well" in line, line
    assert "--backend" not in line


def _aliases(text: str) -> list:
    """The YAML anchors (`&id001`) and aliases (`*id001`) in `text`."""
    return [event for event in yaml.parse(text) if isinstance(event, yaml.AliasEvent)
            or getattr(event, "anchor", None) is not None]


def test_the_mpijob_is_printed_whole_without_yaml_anchors_and_reads_back_as_rendered(capsys):
    """The launcher's and the workers' security contexts are one object in the rendered job:
    printed once each, not `&id001` and `*id001`."""
    argv = ["render", "--backend", "mpijob", "--strategy", "horovod", "--workers", "2",
            "--namespace", "team-a", "--work-uri", "gs://b/jobs/x", "--name", "hvd"]
    out, body, _ = _render(capsys, *argv)
    assert _aliases(out) == [] and "&id" not in out and "*id" not in out
    rendered, *_ = render_cmd.render_from_args(cli.build_parser().parse_args(argv))
    assert body == rendered
    specs = body["spec"]["mpiReplicaSpecs"]
    contexts = [specs[role]["template"]["spec"]["containers"][0].get("securityContext")
                for role in ("Launcher", "Worker")]
    assert contexts[0] is not None and contexts[0] == contexts[1]


def test_yaml_for_a_person_repeats_a_shared_part():
    shared = {"drop": ["ALL"]}
    text = to_yaml({"a": shared, "b": shared}, sort_keys=False)
    assert _aliases(text) == [] and yaml.safe_load(text) == {"a": shared, "b": shared}
    assert _aliases(yaml.safe_dump({"a": shared, "b": shared}))  # what PyYAML does by default
