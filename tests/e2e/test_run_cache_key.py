"""`kfdist run` shards a local source again when its contents change, even when the rewrite
keeps the file's size and modification time (as `cp -p`, `rsync -t` or `tar x` of regenerated
data do), and reuses the cached dataset while nothing changes.

Three real `kfdist run tabular` subprocesses into one output directory: the penguins CSV, then
every Adelie relabelled Gentoo (same size, mtime set back), then the same relabelled file again.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

QUICK = ["--label-column", "species", "--strategy", "mirrored", "--epochs", "1", "--accuracy-threshold", "1.0"]
SHARD_CACHED = "  shard     cached: reused the output of an earlier run"
SHARD_STARTED = "  shard     started"


def _run(data: str, out: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "tabular", "--data", data,
                           *QUICK, "--output", out], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return proc.stdout


def _class_names_of_each_dataset(out: str) -> list:
    names = []
    pattern = os.path.join(out, "pipeline_root", "*", "shard-dataset", "**", "metadata.json")
    for path in sorted(glob.glob(pattern, recursive=True), key=os.path.getmtime):
        with open(path) as f:
            names.append(json.load(f)["class_names"])
    return names


def _relabel_keeping_size_and_mtime(path: str, old: str, new: str) -> None:
    before = os.stat(path)
    with open(path) as f:
        text = f.read()
    assert len(old) == len(new) and old in text
    with open(path, "w") as f:
        f.write(text.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache-key")
    data_dir, out = str(root / "data"), str(root / "out")
    subprocess.run([sys.executable, "-m", "kfdist", "sample-data", "tabular", "--out", data_dir],
                   check=True, capture_output=True, timeout=120)
    data = os.path.join(data_dir, "penguins.csv")
    first = _run(data, out)
    _relabel_keeping_size_and_mtime(data, "Adelie", "Gentoo")
    relabelled = _run(data, out)
    unchanged = _run(data, out)
    return dict(first=first, relabelled=relabelled, unchanged=unchanged,
                datasets=_class_names_of_each_dataset(out))


def test_a_rewrite_keeping_size_and_mtime_is_sharded_again(runs):
    for printed in (runs["first"], runs["relabelled"]):
        lines = printed.splitlines()
        assert SHARD_STARTED in lines and not any(l.startswith(SHARD_CACHED) for l in lines)
    first, relabelled = runs["datasets"]
    assert "Adelie" in first and "Adelie" not in relabelled and "Gentoo" in relabelled


def test_the_unchanged_file_reuses_the_cached_dataset(runs):
    lines = runs["unchanged"].splitlines()
    assert any(l.startswith(SHARD_CACHED) for l in lines), runs["unchanged"]
    assert SHARD_STARTED not in lines
    assert len(runs["datasets"]) == 2


def test_a_changed_object_under_a_gs_wildcard_is_sharded_again(gcs_emulator, tmp_path):
    subprocess.run([sys.executable, "-m", "kfdist", "sample-data", "tabular", "--out",
                    str(tmp_path / "data")], check=True, capture_output=True, timeout=120)
    with open(tmp_path / "data" / "penguins.csv") as f:
        header, *rows = f.read().splitlines()
    halves = ["\n".join([header, *rows[0::2]]) + "\n", "\n".join([header, *rows[1::2]]) + "\n"]
    gcs_emulator.create_bucket("cache-wild")
    bucket = gcs_emulator.client().bucket("cache-wild")
    for name, text in zip(("a.csv", "b.csv"), halves):
        bucket.blob(f"penguins/{name}").upload_from_string(text)
    bucket.blob("penguins/README.txt").upload_from_string("not matched by the wildcard")
    out = str(tmp_path / "out")
    first = _run("gs://cache-wild/penguins/*.csv", out).splitlines()
    assert SHARD_STARTED in first
    bucket.blob("penguins/README.txt").upload_from_string("changed, still not matched")
    unchanged = _run("gs://cache-wild/penguins/*.csv", out).splitlines()
    assert any(l.startswith(SHARD_CACHED) for l in unchanged), unchanged
    bucket.blob("penguins/b.csv").upload_from_string(halves[1].replace("Adelie", "Gentoo"))
    changed = _run("gs://cache-wild/penguins/*.csv", out).splitlines()
    assert SHARD_STARTED in changed and not any(l.startswith(SHARD_CACHED) for l in changed)
    assert len(_class_names_of_each_dataset(out)) == 2
