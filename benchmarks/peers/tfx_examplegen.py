"""TFX's CsvExampleGen and Transform's analysis, with TFX's own libraries and no orchestrator.

Runs in the peer environment (`benchmarks/peers/requirements.txt`), not kfdist's:

    python tfx_examplegen.py --csv-glob 'DIR/*.csv' --out DIR --workers 2 [--label label]

ExampleGen, as `tfx.components.example_gen.csv_example_gen` does it: each file's lines read with
Beam's `ReadFromText` (header skipped), parsed by tfx_bsl's `csv_decoder.ParseCSVLine`, the column types inferred by its
`ColumnTypeInferrer` over the whole input, one `tf.train.Example` per row, the rows hashed into
`train` and `eval` buckets (2:1, ExampleGen's default) and written as GZIP TFRecords
(`Split-<name>/data_tfrecord-*.gz`). Transform's analysis then reads the train split with
tfx_bsl's `TFExampleRecord` and runs `tft_beam.AnalyzeDataset` over a `preprocessing_fn` that
records what kfdist's shard step records: every numeric feature's mean and standard deviation
(`tft.scale_to_z_score`) and every string feature's vocabulary
(`tft.compute_and_apply_vocabulary`). StatisticsGen and SchemaGen (TFDV) do not install beside
TensorFlow 2.21, so the schema is the inferred column types. Both run on Beam's DirectRunner with
`--workers` processes. Prints one JSON line: seconds per stage, examples, output bytes, and
`pipeline_done_unix`, the time the pipeline ended (counting the examples written comes after).
"""

import argparse
import csv
import glob
import hashlib
import json
import os
import time

import apache_beam as beam
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from apache_beam.options.pipeline_options import PipelineOptions
from tfx_bsl.coders import csv_decoder
from tfx_bsl.public import tfxio

SPLITS = (("train", 2), ("eval", 1))


def beam_options(workers: int) -> PipelineOptions:
    """Beam's DirectRunner with `workers` worker processes."""
    return PipelineOptions(runner="DirectRunner", direct_num_workers=workers,
                           direct_running_mode="multi_processing")


def _to_example(cells, column_infos):
    feature = {}
    for cell, info in zip(cells, column_infos):
        if info.type == csv_decoder.ColumnType.INT:
            value = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(cell)] if cell else []))
        elif info.type == csv_decoder.ColumnType.FLOAT:
            value = tf.train.Feature(float_list=tf.train.FloatList(value=[float(cell)] if cell else []))
        else:
            value = tf.train.Feature(bytes_list=tf.train.BytesList(value=[cell] if cell else []))
        feature[info.name] = value
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _split_of(serialized: bytes, _count: int) -> int:
    bucket = int.from_bytes(hashlib.sha256(serialized).digest()[:8], "little") % 3
    return 0 if bucket < SPLITS[0][1] else 1


def example_gen(files, out_dir: str, workers: int) -> dict:
    """CsvExampleGen: CSV files to GZIP TFRecords of tf.Examples, hashed 2:1 into train and eval
    (or, given `{split: files}`, each split from its own files); returns the column types."""
    splits = files if isinstance(files, dict) else {"all": list(files)}
    first = next(iter(splits.values()))[0]
    with open(first, encoding="utf-8", newline="") as f:
        names = next(csv.reader(f))  # as TFX's io_utils.load_csv_column_names
    types_out = os.path.join(out_dir, "column_types.json")
    with beam.Pipeline(options=beam_options(workers)) as pipeline:
        # Each file's lines, its header skipped, as CsvExampleGen reads them (ReadFromText).
        parsed = {name: ([pipeline | f"Read{name}{i}" >> beam.io.ReadFromText(
                              path, skip_header_lines=1) for i, path in enumerate(paths)]
                         | f"Lines{name}" >> beam.Flatten()
                         | f"Parse{name}" >> beam.ParDo(csv_decoder.ParseCSVLine(delimiter=","))
                         | f"Cells{name}" >> beam.Keys())
                  for name, paths in splits.items()}
        infos = beam.pvalue.AsSingleton(
            tuple(parsed.values()) | "AllRows" >> beam.Flatten()
            | "Infer" >> beam.CombineGlobally(csv_decoder.ColumnTypeInferrer(
                names, skip_blank_lines=True)))
        for name, rows in parsed.items():
            serialized = (rows | f"Examples{name}" >> beam.Map(_to_example, infos)
                          | f"Serialize{name}" >> beam.Map(
                              lambda e: e.SerializeToString(deterministic=True)))
            if name == "all":
                parts = serialized | "Partition" >> beam.Partition(_split_of, len(SPLITS))
                outputs = zip([split for split, _ in SPLITS], parts)
            else:
                outputs = [(name, serialized)]
            for split, part in outputs:
                _ = part | f"Write{split}" >> beam.io.WriteToTFRecord(
                    os.path.join(out_dir, f"Split-{split}", "data_tfrecord"),
                    file_name_suffix=".gz")
        _ = (infos.pvalue | "Types" >> beam.Map(
            lambda cols: json.dumps({c.name: int(c.type) for c in cols}))
            | "WriteTypes" >> beam.io.WriteToText(types_out, shard_name_template=""))
    with open(types_out) as f:
        return {name: csv_decoder.ColumnType(kind) for name, kind in json.loads(f.read()).items()}


def feature_spec(types: dict, skip) -> dict:
    """The schema SchemaGen would infer: one value per column, of its inferred type."""
    dtype = {csv_decoder.ColumnType.INT: tf.int64, csv_decoder.ColumnType.FLOAT: tf.float32}
    return {name: tf.io.VarLenFeature(dtype.get(kind, tf.string))
            for name, kind in types.items() if name not in skip}


def analyze(train_pattern: str, spec: dict, label: str, out_dir: str, workers: int) -> dict:
    """Transform's analysis: means, standard deviations and vocabularies, on the train split."""
    numeric = [n for n, f in spec.items() if f.dtype != tf.string and n != label]
    strings = [n for n, f in spec.items() if f.dtype == tf.string or n == label]

    def fill_in_missing(sparse, default):
        """A column of one value per row, the default where the cell was empty (as TFX's
        examples do)."""
        dense = tft.sparse_tensor_to_dense_with_shape(sparse, [None, 1], default)
        return tf.squeeze(dense, axis=1)

    def preprocessing_fn(inputs):
        outputs = {}
        for name in numeric:
            value = fill_in_missing(inputs[name], tf.constant(0, inputs[name].dtype))
            outputs[name] = tft.scale_to_z_score(tf.cast(value, tf.float32))
        for name in strings:
            value = inputs[name]
            if value.dtype != tf.string:
                value = tf.SparseTensor(value.indices, tf.strings.as_string(value.values),
                                        value.dense_shape)
            outputs[name] = tft.compute_and_apply_vocabulary(fill_in_missing(value, ""))
        return outputs

    schema = tft.DatasetMetadata.from_feature_spec(spec).schema
    source = tfxio.TFExampleRecord(file_pattern=train_pattern, schema=schema,
                                   telemetry_descriptors=["kfdist-benchmark"])
    graph_dir = os.path.join(out_dir, "transform_graph")
    with beam.Pipeline(options=beam_options(workers)) as pipeline:
        with tft_beam.Context(temp_dir=os.path.join(out_dir, "tmp")):
            raw = pipeline | "Read" >> source.BeamSource()
            transform_fn = (raw, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(
                preprocessing_fn)
            _ = transform_fn | tft_beam.WriteTransformFn(graph_dir)
    return {"numeric_columns": len(numeric), "vocabularies": len(strings)}


def _size(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--csv-glob", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--label", default="label")
    parser.add_argument("--skip", default="id", help="comma-separated columns left out of "
                                                      "the analysis (identifiers)")
    args = parser.parse_args()
    files = sorted(glob.glob(args.csv_glob))
    started = time.perf_counter()
    types = example_gen(files, args.out, args.workers)
    generated = time.perf_counter()
    spec = feature_spec(types, set(filter(None, args.skip.split(","))))
    counts = analyze(os.path.join(args.out, "Split-train", "*.gz"), spec, args.label,
                     args.out, args.workers)
    analyzed = time.perf_counter()
    done_unix = time.time()  # the pipeline's end: counting its output is a check, not its work
    examples = sum(sum(1 for _ in tf.data.TFRecordDataset(glob.glob(os.path.join(
        args.out, f"Split-{name}", "*.gz")), compression_type="GZIP")) for name, _ in SPLITS)
    print(json.dumps({"example_gen_seconds": round(generated - started, 2),
                      "analyze_seconds": round(analyzed - generated, 2),
                      "seconds": round(analyzed - started, 2), "examples": examples,
                      "pipeline_done_unix": done_unix,
                      "output_bytes": _size(os.path.join(args.out, "Split-train"))
                      + _size(os.path.join(args.out, "Split-eval")), **counts}))


if __name__ == "__main__":
    main()
