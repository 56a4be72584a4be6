"""`shard_dataset(runner="beam")` with a remote runner: the workers read and write `gs://`.

The remote runner is Beam's PortableRunner, the runner of a Flink or Spark job
server, with its in-process job server (`job_endpoint=embed`) and its workers
in this process (`environment_type=LOOPBACK`): the pipeline goes through the
portable job API as on a cluster. `gs://` is the GCS emulator; Beam's own GCS
filesystem (gcsio, google-cloud-storage) writes the shards there, unchanged:
without apache-beam's gcp extra it connects anonymously, and
google-cloud-storage follows `STORAGE_EMULATOR_HOST`. The datasets must
equal the one Beam's local runner writes to a local directory, shard for
shard (path, count, SHA-256), and nothing may be left behind on a failure.
"""

from __future__ import annotations

import hashlib
import io
import os
import uuid

import numpy as np
import pytest

from kfdist.components.common import storage
from kfdist.components.common.dataset_spec import load_metadata
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import beam_remote, readers, runtime
from kfdist.components.shard_dataset import beam_transforms as bt
from kfdist.components.shard_dataset.source import ReaderOptions
from kfdist.sample_data import write_mnist_sample

PORTABLE = ("runner=PortableRunner", "job_endpoint=embed", "environment_type=LOOPBACK")
SHARDS = {"num_shards": 3, "num_eval_shards": 2}


def quiet(_):
    pass


@pytest.fixture
def gs(gcs_emulator):
    """`gs://` URIs of two fresh buckets (the emulator lives for the session): `data`, `out`."""
    suffix = uuid.uuid4().hex[:8]
    for name in ("data", "out"):
        gcs_emulator.create_bucket(f"{name}-{suffix}")
    return lambda uri: uri.replace("gs://data/", f"gs://data-{suffix}/").replace(
        "gs://out/", f"gs://out-{suffix}/")


@pytest.fixture
def mnist(gcs_emulator, gs, tmp_path):
    """The MNIST sample, local and at gs://data/mnist."""
    local = str(tmp_path / "mnist")
    write_mnist_sample(local)
    gcs_emulator.upload_dir(local, gs("gs://data/mnist"))
    return local


def beam_locally(source: str, tmp_path, **kwargs):
    """The reference: Beam's local runner (FnApiRunner) writing into a local directory."""
    return runtime.shard(source, str(tmp_path / "reference"), runner="beam", log=quiet,
                         beam_options=("direct_num_workers=2",), **kwargs)


def assert_same_dataset(meta, reference, directory: str) -> None:
    assert meta.splits == reference.splits  # every shard's path, count and SHA-256
    assert (meta.preprocessing, meta.feature, meta.num_classes, meta.split, meta.split_files) == \
        (reference.preprocessing, reference.feature, reference.num_classes, reference.split,
         reference.split_files)
    assert load_metadata(directory) == meta
    for split in ("train", "eval"):
        for shard in meta.splits[split].shards:
            with open(os.path.join(directory, shard.path), "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == shard.sha256


def test_a_gs_output_written_by_remote_workers_is_the_local_dataset(
        gcs_emulator, gs, mnist, tmp_path):
    reference = beam_locally(mnist, tmp_path, **SHARDS)
    lines = []
    output = gs("gs://out/datasets/mnist")
    meta = runtime.shard(gs("gs://data/mnist"), output, runner="beam", beam_options=PORTABLE,
                         log=lines.append, **SHARDS)

    copied = gcs_emulator.download_dir(output, str(tmp_path / "copied"))
    assert_same_dataset(meta, reference, copied)
    assert gcs_emulator.list(gs("gs://out/")) == sorted([f"{output}/metadata.json"] + [
        f"{output}/{s.path}" for split in ("train", "eval") for s in meta.splits[split].shards])
    assert any(f"shards written under {output}.tmp-" in line for line in lines)


def test_a_local_output_is_built_under_the_gs_temp_location(gcs_emulator, gs, mnist, tmp_path):
    """A KFP step's artifact path or a `kfdist run` directory: the workers write under
    temp_location, the driver downloads."""
    reference = beam_locally(mnist, tmp_path, **SHARDS)
    output = str(tmp_path / "dataset")
    meta = runtime.shard(gs("gs://data/mnist"), output, runner="beam", log=quiet,
                         beam_options=PORTABLE + (gs("temp_location=gs://out/tmp"),), **SHARDS)
    assert_same_dataset(meta, reference, output)
    assert gcs_emulator.list(gs("gs://out/")) == []
    assert sorted(os.listdir(tmp_path)) == ["dataset", "mnist", "reference"]


def _png(size: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.zeros((size, size), np.uint8)).save(out, format="PNG")
    return out.getvalue()


def _write_images(path: str, sizes) -> None:
    """PNG digits of `sizes` pixels a side in a TFRecord file."""
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for i, size in enumerate(sizes):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(size)])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}))
                .SerializeToString())


@pytest.fixture
def left_behind(monkeypatch):
    """What each `SharedBuild.discard` found under the shared prefix before deleting it."""
    found = []
    discard = beam_remote.SharedBuild.discard

    def recording(shared, log):
        found.append(storage.list_uris(shared.root))
        discard(shared, log)

    monkeypatch.setattr(beam_remote.SharedBuild, "discard", recording)
    return found


def test_bad_input_met_by_a_remote_worker_leaves_nothing_on_gs(
        gcs_emulator, gs, tmp_path, left_behind):
    """The source opens (from its first record); the worker reading the second file meets a
    larger image in its middle, after the first file's shards were written."""
    _write_images(str(tmp_path / "images" / "a.tfrecord"), [8] * 40)
    _write_images(str(tmp_path / "images" / "b.tfrecord"), [8] * 10 + [9] + [8] * 10)
    gcs_emulator.upload_dir(str(tmp_path / "images"), gs("gs://data/images"))
    with pytest.raises(InvalidInputError, match="record 10"):
        runtime.shard(gs("gs://data/images"), gs("gs://out/datasets/images"), runner="beam",
                      beam_options=PORTABLE, num_shards=1, num_eval_shards=1, log=quiet)
    assert len(left_behind) == 1 and left_behind[0]  # the shards of the good file's examples
    assert gcs_emulator.list(gs("gs://out/")) == []  # neither the output nor the build prefix


def test_a_failure_after_the_copy_removes_the_copied_shards(gcs_emulator, gs, mnist, monkeypatch):
    output = gs("gs://out/datasets/mnist")

    def fail(*_):
        assert gcs_emulator.list(output)  # the shards, copied
        raise OSError("the metadata upload failed")

    monkeypatch.setattr(runtime, "publish", fail)
    with pytest.raises(OSError, match="metadata upload failed"):
        runtime.shard(gs("gs://data/mnist"), output, runner="beam", beam_options=PORTABLE,
                      log=quiet, **SHARDS)
    assert gcs_emulator.list(gs("gs://out/")) == []


@pytest.mark.parametrize("source,output,options,named", [
    ("gs://data/src", "OUT", ("runner=DataflowRunner",), "output_dir"),
    ("gs://data/src", "OUT", ("runner=flink", "temp_location=/tmp/beam"), "temp_location"),
    ("SRC", "gs://out/ds", ("runner=PortableRunner",), "source_uri"),
    ("gs://data/src", "gs://out/", ("runner=SparkRunner",), "whole bucket"),
])
def test_paths_remote_workers_cannot_reach_are_refused_before_anything_runs(
        source, output, options, named, gcs_emulator, gs, tmp_path):
    source = gs(source.replace("SRC", str(tmp_path / "src")))  # gs://data/src does not exist
    output = gs(output.replace("OUT", str(tmp_path / "out")))
    with pytest.raises(InvalidInputError) as raised:
        runtime.shard(source, output, runner="beam", beam_options=options, log=quiet)
    message = str(raised.value)
    assert named in message and "gs://BUCKET/PATH" in message
    assert repr(source if named == "source_uri" else output) in message
    assert os.listdir(tmp_path) == [] and gcs_emulator.list(gs("gs://out/")) == []


def test_runner_names():
    for local in ("FnApiRunner", "DirectRunner", "direct", "PrismRunner",
                  "apache_beam.runners.portability.fn_api_runner.FnApiRunner"):
        assert beam_remote.is_local_runner(local), local
    for remote in ("DataflowRunner", "dataflow", "FlinkRunner", "SparkRunner", "PortableRunner",
                   "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"):
        assert not beam_remote.is_local_runner(remote), remote


def test_a_worker_without_the_staged_source_copies_its_unit_from_gs(
        gcs_emulator, gs, mnist, tmp_path):
    """A worker on another machine: the unit's files (an IDX images/labels pair) are copied from
    gs:// to the driver's paths, read, then deleted."""
    staged = storage.stage_locally(gs("gs://data/mnist"), str(tmp_path / "driver"))
    source = readers.open_source(staged, "mnist_idx", ReaderOptions())
    shared = beam_remote.SharedBuild(gs("gs://out/ds.tmp-1"), gs("gs://out/ds"),
                                     gs("gs://data/mnist"))
    origins = shared.origins(staged, source.files)
    assert sorted(origins.values()) == gcs_emulator.list(gs("gs://data/mnist"))
    split_mask = lambda batch: np.zeros(len(batch.labels), bool)  # noqa: E731
    expected = list(beam_remote.on_unit(1, bt.scan_unit, source, origins, split_mask))
    for path in source.files:
        os.remove(path)
    got = list(beam_remote.on_unit(1, bt.scan_unit, source, origins, split_mask))
    assert [b["checksum"] for b in got] == [b["checksum"] for b in expected] and len(got) > 0
    assert [b["key"] for b in got] == [(1, i) for i in range(len(got))]
    assert not any(os.path.exists(p) for p in source.files)  # the copies are gone
