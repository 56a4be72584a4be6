"""The `tabular` and `images` pipelines, end to end, with every strategy, on their samples.

`kfdist run tabular` (Palmer penguins CSV: numbers, strings, `NA`; hash split)
and `kfdist run images --epochs 5` (scikit-learn digits as PNGs in
`train.tfrecord`/`test.tfrecord`: predefined split) run in a subprocess with
no `--data` and `--strategy S`: tabular with `parameter_server` and `horovod`,
images with `multi_worker_mirrored` (the default) and `mirrored`, so every
strategy runs a whole pipeline once: 4 runs, each shared by the tests
of its (pipeline, strategy) through a module-scoped fixture. Each run must be
blessed above the bar, name its strategy, run with that strategy's defaults
(workers, parameter servers, restart policy; the `[ps-0]`, `[chief-0]` or
`[rank-N]` replicas in its logs; the input-bound fraction, which asynchronous
parameter_server steps do not measure) and leave an export, and the
exported `serving_default` signature, fed raw inputs a client would have,
must reproduce what evaluation counted:

* tabular: the eval split's raw rows, column by column as `kfdist_export.json`
  names them, give exactly `predict_classes`' classes and the summary's
  accuracy; the original CSV's text rows (`NA` → NaN) are accepted too and
  agree with evaluation on the penguins that are in the eval split.
* tabular, sliced by `island` and `year`: each slice's examples and accuracy are those of the
  eval rows holding that value, and the report shows them.
* images: the original PNG bytes of `test.tfrecord` (the eval split) give the
  classes `predict_classes` gives the shuffled eval shards, matched by their
  pixels (decoded with Pillow), and the summary's accuracy.
"""

import collections
import csv
import glob
import io
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.slow

#: The strategies each pipeline runs with: every strategy once, each pipeline with two (string
#: lookup tables under parameter_server and Horovod's ranks on the table; image decoding under
#: the all-reduce strategies).
STRATEGIES = {"tabular": ("parameter_server", "horovod"),
              "images": ("multi_worker_mirrored", "mirrored")}
#: What each strategy runs with when nothing else is said: workers, ps, restart policy.
DEFAULTS = {
    "multi_worker_mirrored": (2, 0, "ExitCode"),
    "mirrored": (1, 0, "ExitCode"),
    "parameter_server": (2, 1, "ExitCode"),
    "horovod": (2, 0, "OnFailure"),
}
#: Held-out accuracy each pipeline's run must reach on its sample.
ACCURACY_BAR = {"tabular": 0.95, "images": 0.90}
#: Options beyond `--strategy` (tabular keeps its own defaults: 30 epochs, batch 32, lr 0.01,
#: and has its held-out split sliced by a string column and a numeric one of three values).
EXTRA_ARGS = {"tabular": ("--slice-columns", "island,year"), "images": ("--epochs", "5")}
#: The name each model is served under: after its data, the bundled samples.
SERVED = {"tabular": "penguins", "images": "images"}
#: Wall seconds of each run, printed at the end of the module (pytest -s) and in its failures.
RUN_SECONDS = {}


# ------------------------------------------------------------------------------ helpers


class Run:
    """One finished `kfdist run`: its output directory, summary and exported model."""

    def __init__(self, pipeline: str, strategy: str, out: str, summary: dict, seconds: float):
        self.pipeline, self.strategy, self.out = pipeline, strategy, out
        self.summary, self.seconds = summary, seconds

    @property
    def export_path(self) -> str:
        return self.summary["export"]["path"]

    @property
    def export_info(self) -> dict:
        with open(os.path.join(self.export_path, "assets.extra", "kfdist_export.json")) as f:
            return json.load(f)

    @property
    def dataset_dir(self) -> str:
        """The shard step's dataset, found by its metadata under the run's pipeline root."""
        [meta] = glob.glob(os.path.join(self.out, "pipeline_root", "*", "shard-dataset", "**",
                                        "metadata.json"), recursive=True)
        return os.path.dirname(meta)

    @property
    def model_dir(self) -> str:
        """The model artifact the export was made from (its `model_source`)."""
        source = self.export_info["model_source"]
        assert source.startswith(os.path.join(self.out, "pipeline_root") + os.sep), source
        return source

    def serve(self):
        """The exported model's `serving_default` signature."""
        import tensorflow as tf

        return tf.saved_model.load(self.export_path).signatures["serving_default"]

    def predict_classes(self) -> np.ndarray:
        from kfdist.components.evaluate_model.runtime import predict_classes

        return predict_classes(self.model_dir, self.dataset_dir)


def _kfdist_run(pipeline: str, strategy: str, out: str) -> Run:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", pipeline, "--strategy", strategy,
         *EXTRA_ARGS[pipeline], "--output", out],
        capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - start
    RUN_SECONDS[f"{pipeline}/{strategy}"] = round(seconds, 1)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        return Run(pipeline, strategy, out, json.load(f), seconds)


def _eval_split(dataset_dir: str):
    """`(raw, labels, meta)` of the eval split, in shard order (what `predict_classes` reads)."""
    import tensorflow as tf

    from kfdist.components.common import dataset_spec, tf_features

    meta = dataset_spec.load_metadata(dataset_dir)
    records = tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, "eval"),
                                      compression_type=tf_features.compression_type(meta))
    raw, labels = next(iter(records.batch(1_000_000).map(tf_features.parse_fn(meta))))
    assert len(labels) == meta.splits["eval"].num_examples
    return raw, labels.numpy(), meta


def _accuracy(predicted, labels) -> float:
    """As evaluation computes it: correct predictions over examples."""
    return float(np.sum(np.asarray(predicted) == np.asarray(labels))) / len(labels)


def _check_outputs(outputs, rows: int, num_classes: int) -> np.ndarray:
    """Checks the signature's outputs' types and shapes; returns the class ids."""
    import tensorflow as tf

    assert outputs["class_ids"].dtype == tf.int64 and outputs["probabilities"].dtype == tf.float32
    probabilities = outputs["probabilities"].numpy()
    assert probabilities.shape == (rows, num_classes)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    classes = outputs["class_ids"].numpy()
    np.testing.assert_array_equal(classes, probabilities.argmax(axis=1))
    return classes


def _table_inputs(run: Run, raw) -> dict:
    """The eval rows (`parse_fn`'s raw dict) as the signature's inputs, one per column."""
    import tensorflow as tf

    from kfdist.components.common.dataset_spec import CATEGORICAL_KEY, FEATURES_KEY

    info = run.export_info
    numeric = info["feature"]["columns"] or []
    strings = info["feature"]["categorical_columns"] or []
    inputs = {}
    for name, spec in info["signature"]["inputs"].items():
        column = spec["column"]
        if spec["kind"] == "numeric":
            inputs[name] = tf.constant(raw[FEATURES_KEY][:, numeric.index(column)], tf.float32)
        else:
            assert spec["kind"] == "categorical" and spec["dtype"] == "string", spec
            inputs[name] = tf.constant(raw[CATEGORICAL_KEY][:, strings.index(column)], tf.string)
    return inputs


def _csv_rows(path: str):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _csv_inputs(run: Run, rows) -> dict:
    """CSV text rows as the signature's inputs: numbers via float, `NA` → NaN, strings as they are."""
    import tensorflow as tf

    inputs = {}
    for name, spec in run.export_info["signature"]["inputs"].items():
        cells = [row[spec["column"]] for row in rows]
        if spec["kind"] == "numeric":
            inputs[name] = tf.constant([math.nan if c == "NA" else float(c) for c in cells],
                                       tf.float32)
        else:
            inputs[name] = tf.constant(cells, tf.string)
    return inputs


def _row_keys(inputs: dict) -> list:
    """One hashable key per row of signature inputs (float32 values, NaN as None)."""
    columns = []
    for name in sorted(inputs):
        values = inputs[name].numpy()
        if values.dtype == object:
            columns.append([v.decode() for v in values])
        else:
            columns.append([None if np.isnan(v) else float(v) for v in values])
    return list(zip(*columns))


def _source_examples(source_dir: str):
    """The original `test.tfrecord`'s `(png_bytes, label)` pairs, in file order."""
    import tensorflow as tf

    from kfdist.sample_data import IMAGES_TEST

    pairs = []
    for record in tf.data.TFRecordDataset(os.path.join(source_dir, IMAGES_TEST)):
        example = tf.train.Example.FromString(record.numpy())
        [png] = example.features.feature["image"].bytes_list.value
        [label] = example.features.feature["label"].int64_list.value
        pairs.append((png, label))
    return pairs


def _png_pixels(png: bytes) -> bytes:
    """The image's pixels decoded with Pillow (not TensorFlow), as a key: uint8 28x28."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)))
    assert pixels.dtype == np.uint8 and pixels.shape == (28, 28), pixels.shape
    return pixels.tobytes()


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module", params=STRATEGIES["tabular"])
def tabular_run(request, tmp_path_factory):
    return _kfdist_run("tabular", request.param, str(tmp_path_factory.mktemp("tabular")))


@pytest.fixture(scope="module", params=STRATEGIES["images"])
def images_run(request, tmp_path_factory):
    return _kfdist_run("images", request.param, str(tmp_path_factory.mktemp("images")))


@pytest.fixture(scope="module", autouse=True)
def _report_run_seconds():
    yield
    print("\nkfdist run wall seconds:", json.dumps(RUN_SECONDS, indent=1))


def _check_strategy_defaults(run: Run) -> None:
    """`--strategy S` and nothing else: the strategy's layout, restart policy and replicas."""
    train = run.summary["train"]
    assert (train["workers"], train["ps"], train["restart_policy"]) == DEFAULTS[run.strategy]
    log = "".join(open(os.path.join(run.out, "logs", name)).read()
                  for name in sorted(os.listdir(os.path.join(run.out, "logs"))))
    if run.strategy == "parameter_server":
        assert "[ps-0]" in log and "[chief-0]" in log
        assert train["input_bound_fraction"] is None  # asynchronous steps: not measured
    else:
        assert 0.0 <= train["input_bound_fraction"] <= 1.0
    if run.strategy == "horovod":
        assert "[rank-0]" in log and "[rank-1]" in log


def _check_blessed_summary(run: Run) -> None:
    summary = run.summary
    assert summary["pipeline"] == run.pipeline
    assert summary["train"]["strategy"] == run.strategy
    assert summary["train"]["restarts"] == 0
    _check_strategy_defaults(run)
    accuracy = summary["eval"]["accuracy"]
    assert accuracy >= ACCURACY_BAR[run.pipeline], (
        f"{run.pipeline}/{run.strategy}: held-out accuracy {accuracy} < "
        f"{ACCURACY_BAR[run.pipeline]}; summary: {json.dumps(summary['train'])}")
    assert summary["blessed"] is True
    export = summary["export"]
    assert export["exported"] is True and os.path.isdir(export["path"])
    assert export["path"].startswith(os.path.join(run.out, "serving", SERVED[run.pipeline])
                                     + os.sep)
    assert os.path.isfile(os.path.join(export["path"], "saved_model.pb"))
    info = run.export_info
    assert info["version"] == export["version"] and info["path"] == export["path"]
    assert info["serving_model_name"] == SERVED[run.pipeline] == run.summary["model_name"]


def _check_signature_matches_export_info(run: Run) -> None:
    serve = run.serve()
    _, given = serve.structured_input_signature
    described = run.export_info["signature"]["inputs"]
    assert sorted(given) == sorted(described)
    for name, spec in described.items():
        assert given[name].dtype.name == spec["dtype"], name
        assert given[name].shape.as_list() == spec["shape"], name
    assert sorted(serve.structured_outputs) == ["class_ids", "class_names", "probabilities"]


# ------------------------------------------------------------------------------ tabular


def test_tabular_run_is_blessed_and_exported(tabular_run):
    _check_blessed_summary(tabular_run)
    train = tabular_run.summary["train"]
    assert train["epochs"] == 30


def test_tabular_signature_takes_one_input_per_column(tabular_run):
    _check_signature_matches_export_info(tabular_run)
    info = tabular_run.export_info
    header = next(csv.reader(open(tabular_run.summary["data"])))
    features = [c for c in header if c != "species"]
    inputs = info["signature"]["inputs"]
    assert sorted(spec["column"] for spec in inputs.values()) == sorted(features)
    kinds = {spec["column"]: (spec["kind"], spec["dtype"]) for spec in inputs.values()}
    assert kinds["island"] == kinds["sex"] == ("categorical", "string")
    assert kinds["bill_length_mm"] == kinds["year"] == ("numeric", "float32")
    assert info["class_names"] == ["Adelie", "Chinstrap", "Gentoo"]


def test_tabular_signature_reproduces_evaluation(tabular_run):
    raw, labels, meta = _eval_split(tabular_run.dataset_dir)
    assert meta.split == "hash" and meta.num_classes == 3
    inputs = _table_inputs(tabular_run, raw)
    outputs = tabular_run.serve()(**inputs)
    classes = _check_outputs(outputs, len(labels), meta.num_classes)
    np.testing.assert_array_equal(classes, tabular_run.predict_classes())
    names = tabular_run.export_info["class_names"]  # the species, as the CSV names them
    assert [n.decode() for n in outputs["class_names"].numpy()] == [names[c] for c in classes]
    assert _accuracy(classes, labels) == tabular_run.summary["eval"]["accuracy"]


def test_tabular_slices_count_the_eval_split(tabular_run):
    from kfdist.components.common.dataset_spec import CATEGORICAL_KEY, FEATURES_KEY

    raw, labels, meta = _eval_split(tabular_run.dataset_dir)
    predicted = tabular_run.predict_classes()
    columns = {
        "island": np.array([v.decode() for v in raw[CATEGORICAL_KEY].numpy()[
            :, meta.feature.categorical_columns.index("island")]]),
        "year": raw[FEATURES_KEY].numpy()[:, meta.feature.columns.index("year")].astype(int)}
    slices = tabular_run.summary["eval"]["slices"]
    expected = {f"{column}={value}" for column, values in columns.items() for value in set(values)}
    assert set(slices) == expected
    assert expected >= {"island=Biscoe", "island=Dream", "island=Torgersen", "year=2007",
                        "year=2008", "year=2009"}
    [page] = glob.glob(os.path.join(tabular_run.out, "pipeline_root", "*", "evaluate-model",
                                    "report"))
    page = open(page).read()
    for column, values in columns.items():
        assert f"<h3>{column}</h3>" in page
        for value in set(values):
            mine = values == value
            got = slices[f"{column}={value}"]
            assert got["examples"] == mine.sum()
            assert got["accuracy"] == _accuracy(predicted[mine], labels[mine])
            assert f"<td>{value}</td><td>{mine.sum()}</td>" in page
        assert sum(slices[f"{column}={v}"]["examples"] for v in set(values)) == len(labels)


def test_tabular_signature_takes_the_csv_text(tabular_run):
    rows = _csv_rows(tabular_run.summary["data"])
    serve = tabular_run.serve()
    # A handful of penguins, missing values included: the first one, one with every
    # measurement NA, one with sex NA, a Chinstrap and a Gentoo.
    handful = [rows[0], rows[3], rows[8],
               next(r for r in rows if r["species"] == "Chinstrap"),
               next(r for r in rows if r["species"] == "Gentoo")]
    assert handful[1]["bill_length_mm"] == "NA" and handful[2]["sex"] == "NA"
    _check_outputs(serve(**_csv_inputs(tabular_run, handful)), len(handful), 3)
    single = _check_outputs(serve(**_csv_inputs(tabular_run, handful[:1])), 1, 3)

    # Every row of the CSV: the penguins of the eval split get the class evaluation counted.
    everything = _csv_inputs(tabular_run, rows)
    served = _check_outputs(serve(**everything), len(rows), 3)
    assert served[0] == single[0]
    by_row = collections.defaultdict(set)
    for key, label in zip(_row_keys(everything), served):
        by_row[key].add(int(label))
    raw, _, _ = _eval_split(tabular_run.dataset_dir)
    evaluated = tabular_run.predict_classes()
    eval_keys = _row_keys(_table_inputs(tabular_run, raw))
    missing = [key for key in eval_keys if key not in by_row]
    assert not missing, f"eval rows not found in the CSV: {missing[:3]}"
    assert [by_row[key] for key in eval_keys] == [{int(c)} for c in evaluated]


# ------------------------------------------------------------------------------ images


def test_images_run_is_blessed_and_exported(images_run):
    _check_blessed_summary(images_run)
    assert images_run.summary["train"]["epochs"] == 5
    assert os.path.isdir(images_run.summary["data"])


def test_images_signature_takes_encoded_images(images_run):
    _check_signature_matches_export_info(images_run)
    inputs = images_run.export_info["signature"]["inputs"]
    assert inputs == {"image_bytes": {"dtype": "string", "shape": [None], "kind": "encoded_image"}}


def test_images_signature_on_the_original_pngs_reproduces_evaluation(images_run):
    import tensorflow as tf

    source = _source_examples(images_run.summary["data"])
    raw, labels, meta = _eval_split(images_run.dataset_dir)
    assert meta.split == "predefined" and meta.split_files["eval"] == ("test.tfrecord",)
    assert meta.feature.encoding == "png" and tuple(meta.feature.shape) == (28, 28, 1)
    assert len(source) == len(labels)

    served = _check_outputs(
        images_run.serve()(image_bytes=tf.constant([png for png, _ in source], tf.string)),
        len(source), meta.num_classes)
    source_labels = [label for _, label in source]
    assert _accuracy(served, source_labels) == images_run.summary["eval"]["accuracy"]

    # The eval shards hold the same examples, shuffled: match them by their pixels.
    evaluated = images_run.predict_classes()
    pixels = raw.numpy()
    assert pixels.dtype == np.uint8 and pixels.shape == (len(labels), 28, 28, 1)
    in_dataset = collections.defaultdict(list)
    for image, label, predicted in zip(pixels, labels, evaluated):
        in_dataset[image[..., 0].tobytes()].append((int(label), int(predicted)))
    in_source = collections.defaultdict(list)
    for (png, label), predicted in zip(source, served):
        in_source[_png_pixels(png)].append((int(label), int(predicted)))
    assert in_source.keys() == in_dataset.keys()
    for key, examples in in_source.items():
        assert sorted(examples) == sorted(in_dataset[key])
