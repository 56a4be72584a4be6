"""`shard_dataset(runner="beam")` builds the dataset the local runner builds.

Both runners shard the same sources: the MNIST sample (its own split), a CSV
table in three files (strings, missing numbers, a hash split, GZIP) and PNG
images in TFRecord files. The datasets must have the same split membership,
the same statistics and vocabularies (to the bit), the same examples per
split, and shards balanced within one record. The Beam pipeline runs on
Beam's FnApiRunner with two worker processes, as on a cluster's workers.
"""

from __future__ import annotations

import collections
import csv
import os

import numpy as np
import pytest

from kfdist.components.common import tf_features
from kfdist.components.common.dataset_statistics import load_statistics
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import beam_pipeline, readers, runtime
from kfdist.components.shard_dataset import beam_transforms as bt
from kfdist.components.shard_dataset.source import ReaderOptions
from kfdist.sample_data import write_images_sample, write_mnist_sample

TWO_WORKERS = ("direct_num_workers=2",)


def records(root: str, meta, split: str) -> collections.Counter:
    import tensorflow as tf

    data = tf.data.TFRecordDataset(meta.shard_paths(root, split),
                                   compression_type=tf_features.compression_type(meta))
    return collections.Counter(r.numpy() for r in data)


def write_table(directory: str, parts: int = 3, rows: int = 2_500) -> str:
    rng = np.random.default_rng(7)
    os.makedirs(directory, exist_ok=True)
    for part in range(parts):
        with open(os.path.join(directory, f"part-{part}.csv"), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["x", "y", "colour", "label"])
            for _ in range(rows):
                x = "NA" if rng.random() < 0.05 else f"{rng.normal():.4f}"
                writer.writerow([x, f"{rng.normal() * 3:.3f}",
                                 ["red", "green", "blue", "NA"][rng.integers(0, 4)],
                                 int(rng.integers(0, 3))])
    return directory


def shard_both(source: str, tmp_path, **kwargs):
    lines = []
    local = runtime.shard(source, str(tmp_path / "local"), log=lambda _: None, **kwargs)
    beam = runtime.shard(source, str(tmp_path / "beam"), runner="beam", beam_options=TWO_WORKERS,
                         log=lines.append, **kwargs)
    return local, beam, lines


@pytest.mark.parametrize("kind", ["mnist", "table", "images"])
def test_beam_and_local_build_the_same_dataset(kind, tmp_path):
    source = str(tmp_path / "source")
    kwargs = {"num_shards": 4, "num_eval_shards": 2}
    if kind == "mnist":
        write_mnist_sample(source)
    elif kind == "table":
        write_table(source)
        kwargs.update(compression="GZIP", split="hash")
    else:
        write_images_sample(source)
    local, beam, lines = shard_both(source, tmp_path, **kwargs)

    assert (beam.split, beam.split_files, beam.eval_fraction) == \
        (local.split, local.split_files, local.eval_fraction)
    assert beam.feature == local.feature and beam.num_classes == local.num_classes
    assert beam.class_counts == local.class_counts and sum(local.class_counts["eval"]) > 0
    assert beam.preprocessing == local.preprocessing  # statistics, vocabularies: to the bit
    for split in ("train", "eval"):
        assert beam.splits[split].num_examples == local.splits[split].num_examples
        assert records(str(tmp_path / "beam"), beam, split) == \
            records(str(tmp_path / "local"), local, split)
        sizes = [s.num_examples for s in beam.splits[split].shards]
        assert len(sizes) == kwargs[{"train": "num_shards", "eval": "num_eval_shards"}[split]]
        assert max(sizes) - min(sizes) <= 1
    assert "beam: the source was read by 2 worker process(es)" in lines
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    described = ["data_validation.html", "statistics.json"] if kind == "table" else []
    assert sorted(os.listdir(tmp_path / "beam")) == sorted(
        ["eval", "metadata.json", "train"] + described)  # no runs
    assert load_statistics(str(tmp_path / "beam")) == load_statistics(str(tmp_path / "local"))


def test_the_shards_do_not_depend_on_the_number_of_workers(tmp_path):
    source = write_table(str(tmp_path / "source"), parts=2, rows=1_000)
    one = runtime.shard(source, str(tmp_path / "one"), runner="beam",
                        beam_options=("direct_running_mode=in_memory",), log=lambda _: None)
    two = runtime.shard(source, str(tmp_path / "two"), runner="beam", beam_options=TWO_WORKERS,
                        log=lambda _: None)
    assert one.splits == two.splits  # every shard's path, count and SHA-256


def test_bad_input_gets_the_local_error_from_a_beam_worker(tmp_path):
    """A source valid when opened (its first image) but not throughout: the worker that reads
    the bad image reports it, and the step raises the local path's message."""
    import tensorflow as tf
    from PIL import Image
    import io

    def png(size):
        out = io.BytesIO()
        Image.fromarray(np.zeros((size, size), np.uint8)).save(out, format="PNG")
        return out.getvalue()

    source = tmp_path / "source"
    source.mkdir()
    with tf.io.TFRecordWriter(str(source / "data.tfrecord")) as writer:
        for i, size in enumerate([8] * 20 + [9]):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png(size)])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}))
                .SerializeToString())
    messages = []
    for runner, out in (("local", "local"), ("beam", "beam")):
        with pytest.raises(InvalidInputError) as raised:
            runtime.shard(str(source), str(tmp_path / out), runner=runner, num_shards=1,
                          num_eval_shards=1, beam_options=TWO_WORKERS, log=lambda _: None)
        messages.append(str(raised.value))
        assert not os.path.exists(tmp_path / out)
    assert messages[0] == messages[1] and "record 20" in messages[0]


def test_beam_options_are_key_values_over_the_local_defaults():
    options = beam_pipeline.pipeline_options(["runner=DataflowRunner", "--project=p"])
    assert options[-2:] == ["--runner=DataflowRunner", "--project=p"]
    assert "--runner=FnApiRunner" not in options
    with pytest.raises(InvalidInputError, match="'flink' is not KEY=VALUE"):
        beam_pipeline.pipeline_options(["flink"])


@pytest.mark.parametrize("num_shards,count", [(1, 5), (4, 4), (4, 1001), (7, 10_000)])
def test_placement_balances_shards_whatever_the_batches(num_shards, count):
    """Each record's shard and order key depend on its position only, shard sizes differ by at
    most one, and order keys never tie (records are never compared)."""
    whole = bt.placements(0, count, num_shards, seed=3, split="train")
    cuts = sorted({0, count, *np.random.default_rng(count).integers(0, count, 5).tolist()})
    pieces = [bt.placements(a, b - a, num_shards, seed=3, split="train")
              for a, b in zip(cuts, cuts[1:])]
    assert [s for p in pieces for s in p[0]] == whole[0]
    assert [k for p in pieces for k in p[1]] == whole[1]
    sizes = np.bincount(whole[0], minlength=num_shards)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == count
    assert len(set(whole[1])) == count
    other_seed = bt.placements(0, count, num_shards, seed=4, split="train")
    assert other_seed[1] != whole[1]
    assert num_shards == 1 or count < 1000 or other_seed[0] != whole[0]


def test_a_unit_that_changed_since_its_scan_is_reported_not_written(tmp_path):
    source_dir = str(tmp_path / "source")
    write_mnist_sample(source_dir)
    source = readers.open_source(source_dir, "mnist_idx", ReaderOptions())
    split_mask = lambda batch: np.zeros(len(batch.labels), bool)  # noqa: E731
    scans = list(bt.scan_unit(0, source, split_mask))
    plan = bt.plan_batches(dict(bt.plan_entry(s) for s in scans))
    root = str(tmp_path / "build")
    written = list(bt.write_runs(0, source, plan, root, {"train": 2, "eval": 1}, 0))
    assert {key for key, _ in written} == {("train", 0), ("train", 1)}
    first = next(iter(plan["batches"]))
    plan["batches"][first]["checksum"] ^= 1  # as if the file was rewritten between the reads
    [(key, message)] = bt.write_runs(0, source, plan, root, {"train": 2, "eval": 1}, 0)
    assert key == bt.ERRORS and message.startswith("batch 0 of ") and message.endswith(
        "differs from what the scan read: the source changed while it was being read")


def test_the_writing_pass_takes_the_scans_mask_only_for_the_batch_it_scanned():
    """Both runners' writing pass (`scanned_eval_mask`): the scan's eval mask back, bit for
    bit, for the same batch; a changed or unscanned batch is refused."""
    from kfdist.components.shard_dataset.scan import (SourceChangedError, batch_checksum,
                                                      scanned_eval_mask)
    from kfdist.components.shard_dataset.source import ExampleBatch

    rng = np.random.default_rng(0)
    batch = ExampleBatch(inputs=rng.random((11, 3), dtype=np.float32),
                         labels=rng.integers(0, 3, 11), origin="part-0.csv")
    mask = rng.random(11) < 0.4
    scanned = (batch_checksum(batch), np.packbits(mask))
    assert scanned_eval_mask(batch, 4, scanned).tolist() == mask.tolist()
    changed = ExampleBatch(inputs=batch.inputs.copy(), labels=batch.labels.copy(),
                           origin=batch.origin)
    changed.inputs[7, 1] += 1
    for seen in (None, (batch_checksum(batch), np.packbits(mask))):
        with pytest.raises(SourceChangedError, match="batch 4 of part-0.csv differs from what"):
            scanned_eval_mask(changed if seen else batch, 4, seen)
