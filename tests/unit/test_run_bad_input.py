"""`kfdist run tabular|images` reads a bad local source through and refuses it before anything
is written: exit status 2, the bad value named on stderr, no `--output` directory.

Each case runs the real command in a subprocess: a source that passed validation would start the
pipeline and write the output directory, which the test then finds.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from kfdist.components.common import legacy_keras  # noqa: F401  (first: tf-keras before TensorFlow)

import tensorflow as tf  # after kfdist (legacy Keras)


def _kfdist(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfdist", *argv], capture_output=True, text=True,
                          timeout=600)


# ----------------------------------------------------------------------------- sources


def write_csv(path, header, rows) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def table_rows(n: int = 30, start: int = 0):
    return [[f"{(start + i) * 0.5:.2f}", ["red", "blue", "green"][i % 3], str(i % 2)]
            for i in range(n)]


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A PNG of random RGB pixels, encoded with Pillow."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def write_records(path, examples) -> str:
    """Writes `tf.train.Example`s given as {key: bytes | int} dicts."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as w:
        for features in examples:
            feature = {k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
                       if isinstance(v, bytes)
                       else tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
                       for k, v in features.items()}
            w.write(tf.train.Example(features=tf.train.Features(feature=feature))
                    .SerializeToString())
    return str(path)


def images(n: int = 6, size=(8, 8), start: int = 0):
    return [{"image": png(*size, seed=start + i), "label": i % 2} for i in range(n)]


def tabular_without_the_label_column(tmp):
    return write_csv(tmp / "src" / "data.csv", ["x", "colour", "label"], table_rows())


def tabular_mixed_column(tmp):
    rows = table_rows()
    rows[4][1] = "17"  # colour: strings in every other row, a number on line 6
    return write_csv(tmp / "src" / "data.csv", ["x", "colour", "label"], rows)


def tabular_mixed_numeric_column(tmp):
    rows = table_rows()
    rows[9][0] = "unknown"  # x: numbers in every other row, a string on line 11
    return write_csv(tmp / "src" / "data.csv", ["x", "colour", "label"], rows)


def tabular_split_names_in_part(tmp):
    write_csv(tmp / "src" / "train.csv", ["x", "colour", "label"], table_rows())
    write_csv(tmp / "src" / "holdout.csv", ["x", "colour", "label"], table_rows(10, 100))
    return str(tmp / "src")


def tabular_without_split_names(tmp):
    return write_csv(tmp / "src" / "data.csv", ["x", "colour", "label"], table_rows())


def tabular_missing_label(tmp):
    rows = table_rows()
    rows[2][2] = ""
    return write_csv(tmp / "src" / "data.csv", ["x", "colour", "label"], rows)


def tabular_inf(tmp):
    rows = table_rows()
    rows[7][0] = "inf"
    return write_csv(tmp / "src" / "data.csv", ["x", "colour", "label"], rows)


def images_split_names_in_part(tmp):
    write_records(tmp / "src" / "train.tfrecord", images())
    write_records(tmp / "src" / "holdout.tfrecord", images(start=50))
    return str(tmp / "src")


def images_without_split_names(tmp):
    return write_records(tmp / "src" / "data.tfrecord", images())


def images_of_two_sizes(tmp):
    examples = [{"image": png(8, 8, seed=1), "label": 0}, {"image": png(12, 10, seed=2), "label": 1}]
    return write_records(tmp / "src" / "data.tfrecord", examples)


def images_not_images(tmp):
    examples = [{"blob": b"not an image at all, %d" % i, "label": i % 2} for i in range(4)]
    return write_records(tmp / "src" / "data.tfrecord", examples)


CASES = {
    # name: (pipeline, make source, extra flags, substrings stderr must contain)
    "tabular: --label-column not in the header": (
        "tabular", tabular_without_the_label_column, ["--label-column", "species"],
        ["'species'", "['x', 'colour', 'label']"]),
    "tabular: no label column (default 'label')": (
        "tabular", lambda t: write_csv(t / "src" / "d.csv", ["x", "colour", "y"], table_rows()), [],
        ["'label'", "['x', 'colour', 'y']"]),
    "tabular: number in a string column": (
        "tabular", tabular_mixed_column, [], ["'colour'", "'17' at line 6", "'red' at line 2"]),
    "tabular: string in a numeric column": (
        "tabular", tabular_mixed_numeric_column, [],
        ["'x'", "'0.00' at line 2", "'unknown' at line 11"]),
    "tabular: split names in part": (
        "tabular", tabular_split_names_in_part, [], ["holdout.csv", "name none"]),
    "tabular: --split predefined without split names": (
        "tabular", tabular_without_split_names, ["--split", "predefined"],
        ["--split predefined but", "data.csv"]),
    "tabular: a row without its label": (
        "tabular", tabular_missing_label, [], ["line 4", "'label'"]),
    "tabular: inf in a numeric column": (
        "tabular", tabular_inf, [], ["line 9", "'x'", "'inf'"]),
    "images: split names in part": (
        "images", images_split_names_in_part, [], ["holdout.tfrecord", "name none"]),
    "images: --split predefined without split names": (
        "images", images_without_split_names, ["--split", "predefined"],
        ["--split predefined but", "data.tfrecord"]),
    "images: two sizes in one file": (
        "images", images_of_two_sizes, [], ["record 1", "data.tfrecord", "[10, 12, 3]", "[8, 8, 3]"]),
    "images: a bytes feature that holds no images": (
        "images", images_not_images, [], ["'blob'", "data.tfrecord"]),
    "tabular: Beam workers on other machines cannot read a local source": (
        "tabular", tabular_without_split_names,
        ["--shard-runner", "beam", "--beam-option", "runner=DataflowRunner",
         "--beam-option", "temp_location=gs://bucket/tmp"],
        ["runner=DataflowRunner", "data.csv", "gs://BUCKET/PATH"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_sources_are_refused_before_anything_is_written(case, tmp_path):
    pipeline, make_source, flags, expected = CASES[case]
    source = make_source(tmp_path)
    out = tmp_path / "run"
    done = _kfdist("run", pipeline, "--data", source, "--output", str(out), *flags)
    err = done.stderr
    assert done.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("kfdist:")]
    assert len(lines) == 1 and lines[0].startswith("kfdist: invalid input: "), err
    assert "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["src"]


@pytest.mark.parametrize("pipeline", ["tabular", "images"])
def test_an_unknown_split_method_is_refused_by_the_parser(pipeline, tmp_path):
    source = (tabular_without_split_names if pipeline == "tabular"
              else images_without_split_names)(tmp_path)
    out = tmp_path / "run"
    done = _kfdist("run", pipeline, "--data", source, "--output", str(out), "--split", "random")
    assert done.returncode == 2
    err = done.stderr
    assert "kfdist: invalid input: argument --split" in err and "Traceback" not in err
    assert "--split" in err and "'random'" in err
    assert "'auto'" in err and "'predefined'" in err and "'hash'" in err
    assert not out.exists()
