"""KFP interface of `shard_dataset`; the work is done by `runtime.shard`."""

from typing import List, NamedTuple, Optional

from kfp import dsl

from kfdist import RUNTIME_IMAGE


# `source` is `dsl.Input[dsl.Dataset] = None`, not Optional[...]: KFP's driver gives an upstream
# artifact no schema title, and kfp's executor then instantiates the annotation, which a Union
# cannot be.
@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False)
def shard_dataset(
    dataset: dsl.Output[dsl.Dataset],
    data_report: dsl.Output[dsl.HTML],
    source_uri: str = "",
    source: dsl.Input[dsl.Dataset] = None,
    source_format: str = "auto",
    label_column: str = "label",
    num_shards: int = 4,
    num_eval_shards: int = 0,
    eval_fraction: float = 0.2,
    split: str = "auto",
    seed: int = 42,
    compression: Optional[str] = None,
    image_shape: Optional[List[int]] = None,
    image_feature: str = "",
    runner: str = "local",
    beam_options: Optional[List[str]] = None,
    source_version: str = "",
    exclude_columns: Optional[List[str]] = None,
    keep_columns: Optional[List[str]] = None,
    reference_dataset: str = "",
    export_base: str = "",
    serving_model_name: str = "",
    allow_anomalies: bool = False,
    categorical_drift_threshold: float = 0.1,
    numeric_drift_threshold: float = 0.1,
    task: str = "auto",  # dataset_spec.AUTO_TASK (KFP embeds this source)
    default_model_name: str = "model",
) -> NamedTuple("ShardOutputs", [("serving_model_name", str)]):
    """Splits a dataset into train/eval and writes balanced TFRecord shards.

    Args:
        source_uri: Local path or gs://, s3:// or minio:// URI of the source: a directory of MNIST
            IDX files (`*-images-idx3-ubyte.gz` with matching `*-labels-idx1-ubyte.gz`),
            CSV files with one header (numeric and string columns; empty, `NA`
            and the like mark missing cells), TFRecord files of
            tf.train.Example (numeric features, or an encoded PNG/JPEG or raw
            image), or a folder of PNG/JPEG files in one sub-folder per class
            (the sub-folders' names, in alphabetical order, are the classes).
            Give exactly one of it and `source`.
        source: An upstream step's `Dataset` holding the source, in place of `source_uri`
            (`shard_dataset(source=prepare.outputs["wine"], ...)`): its file or folder, of any
            format `source_uri` takes, read from the step's local copy (a file named without
            a suffix needs `source_format`). KFP's cache keys on this artifact, so a cached
            dataset is reused only when the upstream step's output is (no `source_version`
            needed).
        dataset: Output dataset: `train/` and `eval/` TFRecord shards of
            tf.train.Example plus `metadata.json` (feature spec, the split used,
            the label's classes and their examples per split, recorded
            preprocessing: pixel scaling, or the train split's column means,
            deviations and string vocabularies; counts and SHA-256 per shard).
        source_format: `auto` (detected from file names), `mnist_idx`, `csv`,
            `tfrecord`, `image_folder`, or `images` (`tfrecord` or
            `image_folder`, whichever the files are; anything else is refused).
        label_column: Name of the label column (CSV) or int64 feature
            (TFRecord). A table's label holds class names, or whole numbers
            (a TFRecord's and MNIST's labels too; numbers not 0..k-1 become
            classes named by the numbers), or a quantity to predict (see
            `task`); one mixing numbers and text, or a row without a label
            (empty or `NA` alike), is refused.
        num_shards: Number of train shards (at least 1; at least the number of
            training workers for per-file sharding).
        num_eval_shards: Number of eval shards; 0 (the default) means in
            proportion to `eval_fraction` (at least 1). (An integer, not Optional:
            kfp's local runner cannot pass None as a pipeline parameter.)
        eval_fraction: Share of examples put into `eval` by the `hash` split,
            strictly between 0 and 1. The split is a stable hash of each
            example, so reruns agree.
        split: `auto` (default): keep the source's own splits when its files
            or folders are named `train*` and `eval*`/`test*`/`valid*` (MNIST's
            `train-*`/`t10k-*`): the test files become `eval`, never mixed into
            training; otherwise `hash`. `predefined` insists on the source's
            splits; `hash` ignores file names. The dataset's metadata and the
            log say which was used.
        seed: Seed of the shuffle and of the shard assignment.
        compression: `GZIP` to compress shards; none by default.
        image_shape: For TFRecord input with a raw-bytes image feature, its
            shape, e.g. [28, 28] (or int64 `height`/`width`/`channels`
            features in the examples). Encoded PNG/JPEG images need none:
            their size and channels come from the data.
        image_feature: TFRecord input: the bytes feature holding the image;
            empty (the default): the examples' only bytes feature.
        runner: `local` (this step's process) or `beam` (an Apache Beam
            pipeline: the same dataset, read and written by Beam workers).
        beam_options: With `runner=beam`: Beam pipeline options, `KEY=VALUE`
            each, e.g. `["runner=DataflowRunner", "project=P", "region=R",
            "temp_location=gs://B/tmp"]`; none: Beam's FnApiRunner in this
            step, one worker process per core.
        source_version: Identifies the content of `source_uri` (a dataset
            version, a hash). Not read by the step: it takes part in KFP's
            cache key, so a cached output is reused only for the same data.
            With `source`, the cache key has the upstream artifact already.
        exclude_columns: CSV input: columns to leave out of the dataset (never
            read; neither stored nor a model input), e.g. `["customer_id"]`.
            Naming a column the source lacks, or the label, is refused.
        keep_columns: CSV input: string columns to keep even if they identify
            rows. By default a string column with a distinct value in at
            least 90% of the train split's rows (100 rows or more: an id, a
            date, free text) is left out: a model could only memorise the
            train rows by it. The step's log and the dataset's metadata name
            each column left out and why.
        reference_dataset: Tables: a dataset directory (local, gs://, s3:// or minio://) a
            shard step wrote, to check the new table against; empty (the
            default): the dataset the model served under `export_base` /
            `serving_model_name` was trained on (the latest exported version
            carries its spec and statistics), if there is one.
        export_base: The serving export base of the default reference.
        serving_model_name: The served model's name under `export_base`;
            empty (the default): after the data, the name of `source_uri`'s
            file or folder (`wine.csv` and `wine/train.csv`: `wine`; lower
            case, what a path cannot hold as `-`), or of `source`'s URI (its
            last part: the upstream step's output's name, `wine`), else
            `default_model_name`.
        allow_anomalies: Go on when the table breaks the reference's schema (a
            column missing or new, a kind changed, a string value the
            reference never had, a rise of a column's missing share above 10
            points, a label class the reference never had or one it had and
            the table lacks). By default that fails the step, one log line
            per anomaly.
        categorical_drift_threshold: L-infinity distance between a string
            column's value distributions (as TFDV measures it) above which it
            drifted: a warning.
        numeric_drift_threshold: Jensen-Shannon divergence (base 2, 0 to 1)
            between a numeric column's histograms, binned at the reference's
            edges, above which it drifted: a warning.
        data_report: HTML: what became of each column, the table's statistics
            and, with a reference, the anomalies and each column's drift; also
            written when the anomalies stop the step.
        task: What a table's label is: `auto` (the default): a number to
            predict (regression) when it holds more than 100 distinct numbers,
            else classes (a few numbers that are not whole are refused);
            `classification`: classes (a quantity is refused); `regression`: a
            number (text is refused), its mean, deviation, minimum and maximum
            per split recorded in the dataset.
        default_model_name: The served model's name when neither
            `serving_model_name` nor the data gives one (the pipelines
            pass their own name, e.g. `tabular`).

    Returns:
        serving_model_name: The name the model is served under (the served
            model the data is checked against, compared with and replaced):
            `serving_model_name`, else after the data, else `default_model_name`.
    """
    from collections import namedtuple

    from kfdist.components.common import process_exit, serving_name
    from kfdist.components.shard_dataset import data_check, given_data, runtime
    from kfdist.components.shard_dataset.validation import DataAnomalyError

    process_exit.skip_final_collection()
    read_from, named_after = given_data.chosen(source_uri, source)
    given_name = serving_model_name or None
    served_as = serving_name.serving_name(given_name, named_after, default_model_name)
    print(serving_name.serving_name_line(given_name, named_after, default_model_name), flush=True)
    try:
        meta = runtime.shard(
            read_from, dataset.path, source_format=source_format, label_column=label_column,
            num_shards=num_shards, num_eval_shards=num_eval_shards or None,
            eval_fraction=eval_fraction, split=split, seed=seed, compression=compression,
            image_shape=image_shape, image_feature=image_feature, runner=runner,
            beam_options=beam_options or (), exclude_columns=exclude_columns,
            keep_columns=keep_columns, reference_dataset=reference_dataset,
            export_base=export_base, serving_model_name=served_as,
            allow_anomalies=allow_anomalies,
            categorical_drift_threshold=categorical_drift_threshold,
            numeric_drift_threshold=numeric_drift_threshold, task=task, recorded_uri=named_after)
    except DataAnomalyError as stopped:  # the page says why, although no dataset is written
        if stopped.page is not None:
            with open(data_report.path, "w") as f:
                f.write(stopped.page)
        raise
    dataset.metadata.update(data_check.artifact_summary(
        dataset.path, meta, data_report.path, keep_columns or ()))
    return namedtuple("ShardOutputs", ["serving_model_name"])(served_as)
