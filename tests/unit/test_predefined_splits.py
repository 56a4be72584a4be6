"""Predefined splits: a source's own `train`/`test` files stay apart; `split=hash` mixes them.

Real-format MNIST (60,000 `train-*` and 10,000 `t10k-*` examples, gzip IDX)
is generated with a unique id stamped into every image, so each shard can be
traced back to the source file its examples came from.
"""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest

from kfdist.components.common import dataset_spec
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import runtime, splits

from fakes.source_files import read_split, synthetic_digits, write_idx_pair

NUM_TRAIN, NUM_TEST = 60_000, 10_000


def example_ids(images: np.ndarray) -> np.ndarray:
    """The id `synthetic_digits` stamped into each image's first four pixels."""
    return np.frombuffer(np.ascontiguousarray(images[:, 0, :4]).tobytes(), "<u4")


@pytest.fixture(scope="module")
def real_format_mnist(tmp_path_factory) -> str:
    """MNIST as published: train-* (60,000) and t10k-* (10,000) gzip IDX pairs."""
    out = str(tmp_path_factory.mktemp("mnist"))
    images, labels = synthetic_digits(NUM_TRAIN + NUM_TEST)
    write_idx_pair(out, images[:NUM_TRAIN], labels[:NUM_TRAIN], prefix="train")
    write_idx_pair(out, images[NUM_TRAIN:], labels[NUM_TRAIN:], prefix="t10k")
    return out


def test_mnist_test_files_become_the_eval_split_and_never_reach_training(real_format_mnist,
                                                                          tmp_path):
    out, lines = str(tmp_path / "dataset"), []
    meta = runtime.shard(real_format_mnist, out, num_shards=4, log=lines.append)

    train_ids = example_ids(read_split(out, meta, "train")[0])
    eval_ids = example_ids(read_split(out, meta, "eval")[0])
    assert meta.splits["eval"].num_examples == NUM_TEST == len(eval_ids)
    assert sorted(eval_ids.tolist()) == list(range(NUM_TRAIN, NUM_TRAIN + NUM_TEST))
    assert sorted(train_ids.tolist()) == list(range(NUM_TRAIN))
    assert meta.split == dataset_spec.PREDEFINED_SPLIT and meta.eval_fraction is None
    assert meta.split_files == {
        "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
        "eval": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
    assert "split: predefined (the source names its splits)" in lines
    assert dataset_spec.load_metadata(out).split_files == meta.split_files


def test_split_hash_pools_the_files_and_says_so(real_format_mnist, tmp_path):
    out, lines = str(tmp_path / "dataset"), []
    meta = runtime.shard(real_format_mnist, out, split="hash", eval_fraction=0.2,
                         log=lines.append)

    test_in_training = np.isin(example_ids(read_split(out, meta, "train")[0]),
                               np.arange(NUM_TRAIN, NUM_TRAIN + NUM_TEST)).sum()
    assert test_in_training > 0.7 * NUM_TEST  # ~80 % of the test files are trained on
    assert meta.split == dataset_spec.HASH_SPLIT and meta.eval_fraction == 0.2
    assert meta.split_files is None
    assert "split: hash (split=hash), eval_fraction=0.2" in lines


def write_csv(path: str, rows, header=("x", "y", "label")) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def rows(start: int, n: int):
    return [(i, i * 0.5, i % 3) for i in range(start, start + n)]


@pytest.mark.parametrize("layout", [
    {"train.csv": rows(0, 40), "eval.csv": rows(100, 10)},
    {"train/part-0.csv": rows(0, 20), "train/part-1.csv": rows(20, 20),
     "test/part-0.csv": rows(100, 10)},
    {"training_data.csv": rows(0, 40), "validation_data.csv": rows(100, 10)},
])
def test_csv_files_or_folders_named_as_splits_are_kept(tmp_path, layout):
    source = tmp_path / "source"
    for name, content in layout.items():
        write_csv(str(source / name), content)
    out = str(tmp_path / "dataset")
    meta = runtime.shard(str(source), out, num_shards=2, num_eval_shards=1, log=print)

    eval_x = read_split(out, meta, "eval")[0][:, 0]
    assert sorted(eval_x.tolist()) == list(range(100, 110))
    assert meta.split == dataset_spec.PREDEFINED_SPLIT
    assert meta.splits["train"].num_examples == 40


def test_a_source_naming_only_some_splits_is_refused_before_anything_is_written(tmp_path):
    source = tmp_path / "source"
    write_csv(str(source / "train.csv"), rows(0, 40))
    write_csv(str(source / "holdout.csv"), rows(100, 10))
    out = str(tmp_path / "dataset")
    with pytest.raises(InvalidInputError, match=r"\['holdout.csv'\] name none .*train\*"):
        runtime.shard(str(source), out, log=print)
    assert not os.path.exists(out)
    meta = runtime.shard(str(source), out, split="hash", num_shards=2, num_eval_shards=1,
                         log=print)
    assert meta.split == "hash" and meta.splits["eval"].num_examples > 0


def test_predefined_needs_both_splits_named_and_auto_falls_back_to_hash(tmp_path):
    source = tmp_path / "source"
    write_csv(str(source / "train.csv"), rows(0, 50))
    out = str(tmp_path / "dataset")
    with pytest.raises(InvalidInputError, match=r"split=predefined but .*'train.csv'"):
        runtime.shard(str(source), out, split="predefined", log=print)
    assert not os.path.exists(out)
    lines = []
    meta = runtime.shard(str(source), out, num_shards=2, num_eval_shards=1, log=lines.append)
    assert meta.split == "hash"
    assert "split: hash (the source names only its train split), eval_fraction=0.2" in lines


def test_an_unknown_split_method_is_named(tmp_path):
    write_csv(str(tmp_path / "data.csv"), rows(0, 20))
    with pytest.raises(InvalidInputError, match=r"unknown split 'random'.*'auto', 'predefined'"):
        runtime.shard(str(tmp_path / "data.csv"), str(tmp_path / "out"), split="random")
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("name, split", [
    ("train-images-idx3-ubyte.gz", "train"), ("t10k-labels-idx1-ubyte.gz", "eval"),
    ("Test.csv", "eval"), ("valid", "eval"), ("evaluation", "eval"), ("data.csv", None),
    ("holdout", None), ("mytrain.csv", None)])
def test_split_names(name, split):
    assert splits.split_named_by(name) == split


def test_split_folders_on_gcs_are_kept_and_a_single_gcs_csv_is_hashed(gcs_emulator, tmp_path):
    source = tmp_path / "source"
    write_csv(str(source / "train" / "part-0.csv"), rows(0, 40))
    write_csv(str(source / "test" / "part-0.csv"), rows(100, 10))
    gcs_emulator.create_bucket("kfdist-splits")
    gcs_emulator.upload_dir(str(source), "gs://kfdist-splits/table")

    out = str(tmp_path / "dataset")
    meta = runtime.shard("gs://kfdist-splits/table", out, num_shards=2, num_eval_shards=1,
                         log=print)
    assert meta.split == dataset_spec.PREDEFINED_SPLIT
    assert meta.split_files == {"train": ("train/part-0.csv",), "eval": ("test/part-0.csv",)}
    assert sorted(read_split(out, meta, "eval")[0][:, 0].tolist()) == list(range(100, 110))

    single = runtime.shard("gs://kfdist-splits/table/train/part-0.csv", str(tmp_path / "one"),
                           num_shards=2, num_eval_shards=1, log=print)
    assert single.split == dataset_spec.HASH_SPLIT and single.splits["train"].num_examples < 40
