"""TFX's penguin pipeline, component by component, with TFX's own libraries and no orchestrator.

Runs in the peer environment:

    python tfx_penguins.py --train-csv T.csv --eval-csv E.csv --out DIR --epochs 30 \\
        --batch-size 32 --learning-rate 0.01 --threshold 0.9 [--label species] [--drop id]

Any table of numeric and string columns and one class column runs the same way: `--label` names
the class column (strings or integers, mapped through a vocabulary either way), `--drop` the
columns left out of the schema, as an identifier is.

As TFX's penguin example (`penguin_pipeline_local.py` with Transform) runs it:

1. ExampleGen: the two CSV files as the train and eval splits (`tfx_examplegen.example_gen`);
2. Transform: `tft.scale_to_z_score` for every numeric feature (a missing value filled with 0
   first, as TFX's examples' `_fill_in_missing` does), `compute_and_apply_vocabulary`
   for the string features and the label, analysed on train, applied to both splits and written
   as transformed examples, with the transform graph;
3. Trainer: Keras on the transformed examples, kfdist's tabular MLP shape (Dense 64, Dropout 0.1,
   Dense 32, softmax), Adam; the SavedModel's `serving_default` takes serialized raw
   `tf.Example`s through the transform layer, and `transform_features` maps raw examples to
   transformed ones (Evaluator reads the label through it, as the penguin example does);
4. Evaluator: TFMA on the raw eval split, `SparseCategoricalAccuracy` with a lower-bound
   threshold: the blessing;
5. Pusher: the SavedModel copied to `serving/<version>` when blessed.

`--train-rows` gives the Trainer its steps per epoch, as TFX's users give `TrainArgs`.

Prints one JSON line: seconds per component, the seconds the libraries took to import, held-out
accuracy, blessing, whether the pushed model answers a raw row, and `pipeline_done_unix`, the time
the Pusher ended (the raw-row check comes after, as kfdist's comes after its run).
"""

import argparse
import glob
import json
import os
import shutil
import time

_STARTED = time.perf_counter()  # before Beam, TensorFlow and TFX's libraries load

import apache_beam as beam  # noqa: E402 (the imports are timed)
import tensorflow as tf
import tensorflow_model_analysis as tfma
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tfx_bsl.coders import csv_decoder
from tfx_bsl.public import tfxio

from tfx_examplegen import beam_options, example_gen, feature_spec

#: The penguin pipeline's class column, the default of `--label`.
LABEL = "species"


def _dense(sparse, default):
    return tf.squeeze(tft.sparse_tensor_to_dense_with_shape(sparse, [None, 1], default), axis=1)


def _as_strings(sparse):
    if sparse.dtype == tf.string:
        return sparse
    return tf.SparseTensor(sparse.indices, tf.strings.as_string(sparse.values), sparse.dense_shape)


def make_preprocessing_fn(spec: dict, label: str):
    """Transform's module: z-scores, vocabularies, the label's vocabulary (of its values as
    strings when the label is a number)."""
    def preprocessing_fn(inputs):
        outputs = {}
        for name, feature in spec.items():
            if feature.dtype == tf.string or name == label:
                index = tft.compute_and_apply_vocabulary(
                    _dense(_as_strings(inputs[name]), ""), vocab_filename=name,
                    num_oov_buckets=0 if name == label else 1)
                outputs[name + "_xf"] = index
            else:
                value = tf.cast(_dense(inputs[name], tf.constant(0, feature.dtype)), tf.float32)
                outputs[name + "_xf"] = tft.scale_to_z_score(value)
        return outputs
    return preprocessing_fn


def transform(out: str, spec: dict, label: str, workers: int) -> str:
    """Analyses train, transforms both splits; returns the transform graph's directory."""
    schema = tft.DatasetMetadata.from_feature_spec(spec).schema
    graph = os.path.join(out, "transform_graph")
    with beam.Pipeline(options=beam_options(workers)) as pipeline:
        with tft_beam.Context(temp_dir=os.path.join(out, "tmp")):
            sources = {name: tfxio.TFExampleRecord(
                file_pattern=os.path.join(out, f"Split-{name}", "*.gz"), schema=schema,
                telemetry_descriptors=["kfdist-benchmark"]) for name in ("train", "eval")}
            raw = {name: pipeline | f"Read{name}" >> source.BeamSource()
                   for name, source in sources.items()}
            config = sources["train"].TensorAdapterConfig()
            (transformed, metadata), transform_fn = (
                (raw["train"], config) | tft_beam.AnalyzeAndTransformDataset(
                    make_preprocessing_fn(spec, label), output_record_batches=True))
            evaluated, _ = ((raw["eval"], config), transform_fn) | tft_beam.TransformDataset(
                output_record_batches=True)
            _ = transform_fn | tft_beam.WriteTransformFn(graph)
            for name, data in (("train", transformed), ("eval", evaluated)):
                _ = (data | f"Encode{name}" >> beam.FlatMapTuple(
                    lambda batch, _: tfxio_encode(batch))
                    | f"Write{name}" >> beam.io.WriteToTFRecord(
                        os.path.join(out, "transformed", name, "data"), file_name_suffix=".gz"))
    return graph


def tfxio_encode(batch):
    """Serialized tf.Examples of a transformed record batch."""
    from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

    return RecordBatchToExamplesEncoder().encode(batch)


def _dataset(out: str, split: str, tft_output, label: str, batch_size: int, repeat: bool):
    files = glob.glob(os.path.join(out, "transformed", split, "*.gz"))
    data = tf.data.TFRecordDataset(files, compression_type="GZIP")
    if repeat:
        data = data.shuffle(1024, seed=42).repeat()
    spec = tft_output.transformed_feature_spec()

    def split_label(serialized):
        features = tf.io.parse_example(serialized, spec)
        return features, features.pop(label + "_xf")

    return data.batch(batch_size).map(split_label)


def build_model(tft_output, label: str, learning_rate: float):
    """kfdist's tabular MLP over the z-scores and the one-hot vocabularies."""
    inputs, parts = {}, []
    for name, feature in sorted(tft_output.transformed_feature_spec().items()):
        if name == label + "_xf":
            continue
        inputs[name] = tf.keras.Input(shape=(), name=name, dtype=feature.dtype)
        if feature.dtype == tf.int64:
            size = tft_output.vocabulary_size_by_name(name[:-3]) + 1
            parts.append(tf.keras.layers.CategoryEncoding(size, "one_hot")(inputs[name]))
        else:
            parts.append(tf.keras.layers.Reshape((1,))(inputs[name]))
    x = tf.keras.layers.Dense(64, activation="relu")(tf.keras.layers.Concatenate()(parts))
    x = tf.keras.layers.Dropout(0.1)(x)
    x = tf.keras.layers.Dense(32, activation="relu")(x)
    classes = tft_output.vocabulary_size_by_name(label)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(classes, activation="softmax")(x))
    model.compile(tf.keras.optimizers.Adam(learning_rate), "sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"])
    return model


def _signatures(model, tft_output, raw_spec: dict, label: str):
    model.tft_layer = tft_output.transform_features_layer()
    raw_without_label = {k: v for k, v in raw_spec.items() if k != label}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        features = model.tft_layer(tf.io.parse_example(serialized, raw_without_label))
        return {"outputs": model({k: v for k, v in features.items() if k in model.input})}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(serialized):
        return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

    return {"serving_default": serve, "transform_features": transform_features}


def trainer(out: str, graph: str, raw_spec: dict, args) -> str:
    """Trains on the transformed examples; saves the SavedModel with its raw-example signatures."""
    tft_output = tft.TFTransformOutput(graph)
    tf.keras.utils.set_random_seed(42)  # the initial weights too, as kfdist seeds its own
    model = build_model(tft_output, args.label, args.learning_rate)
    model.fit(_dataset(out, "train", tft_output, args.label, args.batch_size, True),
              epochs=args.epochs, steps_per_epoch=-(-args.train_rows // args.batch_size),
              verbose=0)
    path = os.path.join(out, "model")
    model.save(path, save_format="tf",
               signatures=_signatures(model, tft_output, raw_spec, args.label))
    return path


def evaluator(out: str, model_path: str, label: str, threshold: float) -> dict:
    """TFMA on the raw eval split, the label read through `transform_features`."""
    from tensorflow_model_analysis.proto import config_pb2 as tfma_config

    threshold_spec = tfma_config.MetricThreshold(
        value_threshold=tfma_config.GenericValueThreshold(lower_bound={"value": threshold}))
    config = tfma_config.EvalConfig(
        model_specs=[tfma_config.ModelSpec(
            signature_name="serving_default", label_key=label + "_xf",
            preprocessing_function_names=["transform_features"])],
        slicing_specs=[tfma_config.SlicingSpec()],
        metrics_specs=[tfma_config.MetricsSpec(metrics=[tfma_config.MetricConfig(
            class_name="SparseCategoricalAccuracy", threshold=threshold_spec)])])
    result = tfma.run_model_analysis(
        eval_shared_model=tfma.default_eval_shared_model(model_path, eval_config=config),
        eval_config=config, data_location=os.path.join(out, "Split-eval", "*.gz"),
        file_format="tfrecords", output_path=os.path.join(out, "evaluation"))
    [(_, metrics)] = result.slicing_metrics
    accuracy = metrics[""][""]["sparse_categorical_accuracy"]["doubleValue"]
    validation = tfma.load_validation_result(os.path.join(out, "evaluation"))
    return {"accuracy": round(accuracy, 4), "blessed": bool(validation.validation_ok)}


def pusher(model_path: str, out: str) -> str:
    """The blessed SavedModel copied to `serving/<version>`."""
    target = os.path.join(out, "serving", str(int(time.time())))
    shutil.copytree(model_path, target)
    return target


def answers_raw_row(serving: str, row: dict, spec: dict, label: str, classes: int) -> bool:
    """Whether the pushed model scores one raw row (a serialized raw tf.Example of the schema's
    columns but the label): one probability per class."""
    from tfx_examplegen import _to_example

    kinds = {tf.int64: csv_decoder.ColumnType.INT, tf.float32: csv_decoder.ColumnType.FLOAT,
             tf.string: csv_decoder.ColumnType.STRING}
    infos = [csv_decoder.ColumnInfo(name, kinds[feature.dtype]) for name, feature in spec.items()
             if name != label]
    example = _to_example([row[i.name].encode() for i in infos], infos)
    outputs = tf.saved_model.load(serving).signatures["serving_default"](
        examples=tf.constant([example.SerializeToString()]))["outputs"]
    return tuple(outputs.shape) == (1, classes)


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--train-csv", "--eval-csv", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--label", default=LABEL, help="the class column")
    parser.add_argument("--drop", default="", help="comma-separated columns left out of the "
                                                   "schema (identifiers)")
    parser.add_argument("--train-rows", type=int, required=True,
                        help="rows of the train split, for the Trainer's steps per epoch (TFX's "
                             "`TrainArgs(num_steps=...)`, which its users give)")
    args = parser.parse_args()
    seconds, clock = {}, time.perf_counter()
    import_seconds = round(clock - _STARTED, 2)

    def lap(name):
        nonlocal clock
        seconds[name] = round(time.perf_counter() - clock, 2)
        clock = time.perf_counter()

    types = example_gen({"train": [args.train_csv], "eval": [args.eval_csv]}, args.out,
                        args.workers)
    lap("ExampleGen")
    spec = feature_spec(types, skip=set(filter(None, args.drop.split(","))))
    graph = transform(args.out, spec, args.label, args.workers)
    lap("Transform")
    model_path = trainer(args.out, graph, spec, args)
    lap("Trainer")
    evaluation = evaluator(args.out, model_path, args.label, args.threshold)
    lap("Evaluator")
    serving = pusher(model_path, args.out) if evaluation["blessed"] else None
    lap("Pusher")
    done_unix = time.time()  # the pipeline's end: the raw-row check follows
    with open(args.eval_csv, newline="") as f:
        import csv

        row = next(csv.DictReader(f))
    classes = tft.TFTransformOutput(graph).vocabulary_size_by_name(args.label)
    print(json.dumps({"seconds": seconds, "total_seconds": round(sum(seconds.values()), 2),
                      "import_seconds": import_seconds, **evaluation,
                      "pipeline_done_unix": done_unix,
                      "answers_raw_rows": bool(serving) and answers_raw_row(
                          serving, row, spec, args.label, classes)}))


if __name__ == "__main__":
    main()
