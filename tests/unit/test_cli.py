"""`kfdist run` rejects bad input with a clear message before writing anything."""

import gzip
import os
import struct

import numpy as np
import pytest

from kfdist import cli
from kfdist.sample_data import write_idx_images, write_idx_labels, write_mnist_sample


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sample"))
    write_mnist_sample(out)
    return out


def _mismatched_counts(tmp_path) -> str:
    d = tmp_path / "mismatch"
    d.mkdir()
    write_idx_images(str(d / "train-images-idx3-ubyte.gz"), np.zeros((5, 28, 28), np.uint8))
    write_idx_labels(str(d / "train-labels-idx1-ubyte.gz"), np.zeros(4, np.uint8))
    return str(d)


def _corrupt_gzip(tmp_path) -> str:
    d = tmp_path / "corrupt"
    d.mkdir()
    write_idx_images(str(d / "train-images-idx3-ubyte.gz"), np.zeros((50, 28, 28), np.uint8))
    write_idx_labels(str(d / "train-labels-idx1-ubyte.gz"), np.zeros(50, np.uint8))
    path = d / "train-images-idx3-ubyte.gz"
    data = bytearray(path.read_bytes())
    data[-12:-4] = b"\x00" * 8  # damage the deflate stream's tail and the CRC
    path.write_bytes(bytes(data))
    return str(d)


def _run(argv, capsys):
    status = cli.main(argv)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("extra, expected", [
    (["--workers", "-1"], "-1"),
    (["--num-shards", "0"], "--num-shards"),
    (["--eval-fraction", "1.5"], "1.5"),
    (["--eval-fraction", "0"], "--eval-fraction"),
    (["--model", "resnet9000"], "resnet9000"),
    (["--model", "no_such_package_xyz.models:build"], "no_such_package_xyz.models"),
    (["--model", "json:no_such_function"], "no_such_function"),
    (["--accuracy-threshold", "1.2"], "1.2"),
    (["--serving-model-name", "bad/name"], "bad/name"),
])
def test_bad_options_are_rejected_before_anything_is_written(extra, expected, tmp_path, capsys, sample_dir):
    out = tmp_path / "out"
    status, err = _run(["run", "mnist", "--output", str(out), "--data", sample_dir, *extra], capsys)
    assert status == 2
    assert expected in err
    assert not out.exists()


@pytest.mark.parametrize("make_data, expected", [
    (lambda tmp: os.path.join(str(tmp), "does-not-exist"), "does-not-exist"),
    (_mismatched_counts, "5"),
    (_corrupt_gzip, "train-images-idx3-ubyte.gz"),
])
def test_bad_data_is_rejected_before_anything_is_written(make_data, expected, tmp_path, capsys):
    data = make_data(tmp_path)
    out = tmp_path / "out"
    status, err = _run(["run", "mnist", "--output", str(out), "--data", data], capsys)
    assert status == 2, err
    assert expected in err
    assert not out.exists()


def test_sample_data_writes_mnist_idx_files(tmp_path, capsys):
    assert cli.main(["sample-data", "mnist", "--out", str(tmp_path)]) == 0
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
    with gzip.open(tmp_path / "t10k-labels-idx1-ubyte.gz") as f:
        lmagic, n_test = struct.unpack(">II", f.read(8))
    assert (magic, rows, cols, lmagic) == (2051, 28, 28, 2049)
    assert n + n_test == 1797
