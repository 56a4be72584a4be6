"""Bad input to every `kfdist` command ends in one `kfdist:` line naming the bad value (exit 2 for
invalid input, 1 for an error), never a traceback, and nothing is written or written over.

The table runs each command as a subprocess in a directory holding a file, a YAML file that is
not a pipeline and a directory that is not a dataset, and compares the directory's content
before and after."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

CASES = {
    "missing": None,
    "not_json": "{not json",
    "not_an_object": "[1, 2]",
    "lacks_fields": '{"format_version": "kfdist.dataset/v2"}',
}


def _dataset(tmp_path, text):
    root = tmp_path / "data"
    root.mkdir()
    if text is not None:
        (root / "metadata.json").write_text(text)
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_metadata_names_the_bad_dataset(tmp_path, case):
    from kfdist.components.common.dataset_spec import load_metadata
    from kfdist.components.common.errors import InvalidInputError

    root = _dataset(tmp_path, CASES[case])
    with pytest.raises(InvalidInputError, match="is not a kfdist dataset"):
        load_metadata(str(root))


@pytest.mark.parametrize("case", sorted(CASES))
def test_train_refuses_a_bad_dataset_in_one_line(tmp_path, case):
    root = _dataset(tmp_path, CASES[case])
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "kfdist", "train", "--dataset", str(root),
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("kfdist:")]
    assert len(lines) == 1 and lines[0].startswith("kfdist: invalid input:"), proc.stderr
    assert str(root) in lines[0]
    assert not os.path.exists(out)


MNIST_YAML = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "pipelines", "mnist.yaml")
KFP = ["--host", "http://127.0.0.1:9"]  # nothing listens: a request would fail differently
RENDER = ["render", "--backend", "tfjob", "--namespace", "ns", "--work-uri", "gs://b/w"]
LAUNCH = ["launch", "--output", "launched"]
NO_CREDENTIALS = {"GOOGLE_APPLICATION_CREDENTIALS": "missing-key.json"}

BAD_INPUTS = {
    # id: (argv, exit status, text the one `kfdist:` line holds, extra environment)
    "run: --epochs 0": (["run", "mnist", "--epochs", "0"], 2, "got 0", {}),
    "run: unknown strategy": (["run", "mnist", "--strategy", "nope"], 2, "'nope'", {}),
    "run: missing --data": (["run", "tabular", "--data", "missing.csv"], 2, "'missing.csv'", {}),
    "run: --output is a file": (["run", "mnist", "--output", "file.txt"], 2, "'file.txt'", {}),
    "run: --output not writable": (["run", "mnist", "--output", "/proc/kfdist-none"], 2,
                                   "'/proc/kfdist-none'", {}),
    "run: bad CPU quantity": (["run", "mnist", "--backend", "tfjob", "--cpu-per-worker", "abc"], 2,
                              "'abc'", {}),
    "run: unknown model": (["run", "mnist", "--model", "nosuch_model"], 2, "'nosuch_model'", {}),
    "run: threshold above 1": (["run", "mnist", "--accuracy-threshold", "2"], 2,
                               "--accuracy-threshold 2.0", {}),
    "run: min improvement above 1": (["run", "tabular", "--min-improvement", "2"], 2,
                                     "--min-improvement 2.0 is invalid; expected a number in "
                                     "[-1, 1]", {}),
    "run: unknown option": (["run", "mnist", "--param", "x"], 2, "--param", {}),
    "run: a reference that is no dataset": (["run", "tabular", "--reference-dataset", "file.txt"],
                                            2, "--reference-dataset 'file.txt' is not a kfdist "
                                               "dataset", {}),
    "run: a reference whose metadata is broken": (["run", "tabular", "--reference-dataset",
                                                   "notdataset"], 2,
                                                  "--reference-dataset 'notdataset': ", {}),
    "run: a drift threshold above 1": (["run", "tabular", "--numeric-drift-threshold", "3"], 2,
                                       "--numeric-drift-threshold 3.0 is invalid; expected a "
                                       "number from 0 to 1", {}),
    "run: gs:// without credentials": (["run", "tabular", "--data", "gs://kfdist-none/x.csv"], 1,
                                       "'gs://kfdist-none/x.csv'", NO_CREDENTIALS),
    "train: not a dataset": (["train", "--dataset", "notdataset", "--output", "trained"], 2,
                             "notdataset", {}),
    "train: --output under a file": (["train", "--output", "file.txt/sub"], 2, "'file.txt/sub'", {}),
    "train: negative epochs": (["train", "--epochs", "-1", "--output", "trained"], 2, "got -1",
                               {}),
    "train: batch of 0": (["train", "--batch-size", "0", "--output", "trained"], 2, "got 0", {}),
    "render: local backend": (["render", "--backend", "local"], 2, "'local'", {}),
    "render: bad memory quantity": ([*RENDER, "--memory-per-worker", "8GB"], 2, "'8GB'", {}),
    "render: bad image": ([*RENDER, "--image", "UPPER CASE:1"], 2, "'UPPER CASE:1'", {}),
    "render: bad namespace": ([*RENDER, "--namespace", "Bad_NS"], 2, "'Bad_NS'", {}),
    "render: bad object store secret": ([*RENDER, "--object-store-secret", "Store Keys"], 2,
                                        "--object-store-secret 'Store Keys'", {}),
    "train: bad object store secret": (["train", "--backend", "tfjob", "--object-store-secret",
                                        "Store_Keys", "--output", "trained"], 2,
                                       "'Store_Keys'", {}),
    "render: node selector without =": ([*RENDER, "--node-selector", "foo"], 2, "'foo'", {}),
    "render: not a dataset": ([*RENDER, "--dataset", "notdataset"], 2, "notdataset", {}),
    "render: evaluator with horovod": (["render", "--backend", "mpijob", "--strategy", "horovod",
                                        "--evaluator"], 2, "horovod", {}),
    "render: hdfs work location": ([*RENDER, "--work-uri", "hdfs://x"], 2, "'hdfs://x'", {}),
    "render: bad CPU before the missing namespace": (
        ["render", "--backend", "tfjob", "--cpu-per-worker", "abc"], 2, "'abc'", {}),
    "compile: --out-dir is a file": (["compile", "--out-dir", "file.txt"], 2, "'file.txt'", {}),
    "compile: --out-dir not writable": (["compile", "--out-dir", "/proc/kfdist-none"], 2,
                                        "'/proc/kfdist-none'", {}),
    "submit: not a pipeline": (["submit", "notpipe.yaml", *KFP], 2, "'notpipe.yaml'", {}),
    "submit: missing file": (["submit", "missing.yaml", *KFP], 2, "'missing.yaml'", {}),
    "submit: --param without =": (["submit", MNIST_YAML, *KFP, "--param", "epochs"], 2,
                                  "'epochs'", {}),
    "submit: --param of the wrong type": (["submit", MNIST_YAML, *KFP, "--param", "epochs=ten"],
                                          2, "'ten'", {}),
    "submit: unknown parameter": (["submit", MNIST_YAML, *KFP, "--param", "nosuch=1"], 2,
                                  "'nosuch'", {}),
    "submit: host not a URL": (["submit", MNIST_YAML, "--host", "notaurl"], 2, "'notaurl'", {}),
    "run: the program pipeline without --command": (["run", "program"], 2, "--command", {}),
    "run: --command for kfdist's models": (["run", "mnist", "--command", "python t.py"], 2,
                                           "--command", {}),
    "run: a strategy for a program": (["run", "program", "--command", "python t.py",
                                       "--strategy", "horovod"], 2, "--strategy", {}),
    "run: a program that does not exist": (["run", "program", "--command", "/nonexistent/prog"],
                                           2, "'/nonexistent/prog'", {}),
    "run: an argument kfp.local would rewrite": (
        ["run", "program", "--command", "python t.py --lib /opt/python3.11/lib"], 2,
        "'/opt/python3.11/lib'", {}),
    "run: an unknown slice column": (["run", "tabular", "--slice-columns", "islnd"], 2,
                                     "'islnd', which is not a column", {}),
    "run: slicing by the label": (["run", "tabular", "--slice-columns", "species"], 2,
                                  "'species', the label", {}),
    "run: slicing by an excluded column": (["run", "tabular", "--exclude-columns", "sex",
                                            "--slice-columns", "sex"], 2,
                                           "'sex', which is not in the dataset", {}),
    "run: slicing images": (["run", "images", "--slice-columns", "label"], 2,
                            "the examples are images", {}),
    "run: an empty slice column": (["run", "tabular", "--slice-columns", "island,"], 2,
                                   "'island,'", {}),
    "run: a cluster backend without a namespace": (["run", "mnist", "--backend", "tfjob"], 2,
                                                   "namespace is unknown", {}),
    "run: a cluster backend without a shared location": (
        ["run", "mnist", "--backend", "mpijob", "--strategy", "horovod", "--namespace", "ns"], 2,
        "no shared location for the replicas", {}),
    "run: a PyTorchJob for kfdist's models": (["run", "tabular", "--backend", "pytorchjob"], 2,
                                              "--backend pytorchjob runs your own program", {}),
    "run: a PyTorchJob for a PyTorch program, without a shared location": (
        ["run", "program", "--command", "python t.py", "--framework", "pytorch", "--backend",
         "pytorchjob", "--namespace", "ns"], 2, "no shared location for the replicas", {}),
    "sample-data: unknown sample": (["sample-data", "nosuch", "--out", "x"], 2, "'nosuch'", {}),
    "sample-data: --out is a file": (["sample-data", "tabular", "--out", "file.txt"], 2,
                                     "'file.txt'", {}),
    "launch: PS for PyTorch": ([*LAUNCH, "--framework", "pytorch", "--ps", "1", "--", "python",
                                "-c", "1"], 2, "--ps", {}),
    "launch: missing program": ([*LAUNCH, "--framework", "tensorflow", "--",
                                 "/nonexistent/prog"], 2, "'/nonexistent/prog'", {}),
    "launch: an output the replicas cannot reach": (
        [*LAUNCH, "--framework", "pytorch", "--backend", "pytorchjob", "--image", "r/i:1",
         "--name", "ddp", "--", "python", "t.py"], 2, "--output 'launched' is not where", {}),
    "launch: a cluster job without an image": (
        [*LAUNCH, "--framework", "tensorflow", "--backend", "tfjob", "--name", "tf", "--",
         "python", "t.py"], 2, "needs --image IMAGE:TAG (the image that holds your program) or --program-dir", {}),
    "launch: a PVC name that is not a name": (
        [*LAUNCH, "--framework", "tensorflow", "--backend", "tfjob", "--name", "tf", "--image",
         "r/i:1", "--pvc-name", "Team_Work", "--", "python", "t.py"], 2, "'Team_Work'", {}),
}


def _content(root) -> dict:
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
        if not files:
            found[os.path.relpath(folder, root) + "/"] = ""
    return found


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_ends_in_one_line_naming_it(tmp_path, case):
    argv, status, named, env = BAD_INPUTS[case]
    (tmp_path / "file.txt").write_bytes(b"keep me")
    (tmp_path / "notpipe.yaml").write_text("a: 1\n")
    _dataset(tmp_path, "{not json").rename(tmp_path / "notdataset")
    before = _content(tmp_path)
    environment = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    proc = subprocess.run([sys.executable, "-m", "kfdist", *argv], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={**environment, **env})
    assert proc.returncode == status, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("kfdist:")]
    prefix = "kfdist: invalid input: " if status == 2 else "kfdist: error: "
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    assert named in lines[0], lines[0]
    assert _content(tmp_path) == before
