"""The shard step's data check on a real public table split by time.

The Palmer penguins table (shipped with kfdist's tabular sample) is split by
its `year` column: 2007-2008 is the reference, 2009 the new data. Unchanged,
the later year has no anomaly (only `year` itself drifts). With an island the
reference never had and body mass in kilograms instead of grams, the shard
step names the new value as an anomaly and fails before writing anything, and
names the mass's drift; `allow_anomalies` goes on and records both in the
dataset. The reference is a dataset the shard step wrote, or by default the
one the served model was trained on, as the export step leaves it beside the
exported version.
"""

from __future__ import annotations

import csv
import json
import os

import pytest

from kfdist.components.common import model_artifact as ma
from kfdist.components.common.dataset_spec import METADATA_FILE
from kfdist.components.common.dataset_statistics import STATISTICS_FILE, load_statistics
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.export_saved_model import runtime as export_runtime
from kfdist.components.shard_dataset import data_check, runtime
from kfdist.components.shard_dataset.validation import DataAnomalyError
from kfdist.components.shard_dataset.validation_report import REPORT_FILE
from kfdist.sample_data import TABULAR_LABEL_COLUMN, penguins_csv_path, write_mnist_sample

NEW_ISLAND = "Anvers"


def write_rows(path, rows) -> str:
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """`(reference dataset, 2009 as it is, 2009 changed)`: the reference sharded, two CSVs."""
    root = tmp_path_factory.mktemp("penguins")
    with open(penguins_csv_path(), newline="") as f:
        rows = list(csv.DictReader(f))
    earlier = [r for r in rows if int(r["year"]) <= 2008]
    later = [r for r in rows if int(r["year"]) == 2009]
    assert len(earlier) == 224 and len(later) == 120
    changed = []
    for i, row in enumerate(later):
        row = dict(row)
        if row["body_mass_g"] != "NA":
            row["body_mass_g"] = f"{float(row['body_mass_g']) / 1000:.4f}"  # kilograms
        if i % 10 == 0:
            row["island"] = NEW_ISLAND
        changed.append(row)
    reference = str(root / "reference")
    runtime.shard(write_rows(root / "earlier.csv", earlier), reference,
                  label_column=TABULAR_LABEL_COLUMN, num_shards=2, log=lambda _: None)
    return (reference, write_rows(root / "later.csv", later),
            write_rows(root / "changed.csv", changed))


def shard(source, out, **kwargs):
    lines = []
    meta = runtime.shard(source, str(out), label_column=TABULAR_LABEL_COLUMN, num_shards=2,
                         log=lines.append, **kwargs)
    return meta, lines


def test_the_reference_dataset_keeps_its_statistics(tables):
    statistics = load_statistics(tables[0])
    columns = statistics.by_name()
    assert statistics.rows == 224
    assert set(columns["island"].value_counts) == {"Biscoe", "Dream", "Torgersen"}
    with open(penguins_csv_path(), newline="") as f:
        masses = [r["body_mass_g"] for r in csv.DictReader(f) if int(r["year"]) <= 2008]
    known = [float(m) for m in masses if m != "NA"]
    mass = columns["body_mass_g"]
    assert (mass.minimum, mass.maximum) == (min(known), max(known))
    assert mass.missing == len(masses) - len(known) > 0
    assert sum(mass.histogram_counts) == len(known) and len(mass.histogram_edges) == 11


def test_a_later_year_as_it_is_has_no_anomaly(tables, tmp_path):
    _, lines = shard(tables[1], tmp_path / "out", reference_dataset=tables[0])
    assert not [line for line in lines if line.startswith("anomaly:")]
    drifted = [line for line in lines if line.startswith("warning: drift:")]
    assert drifted == ["warning: drift: column 'year': Jensen-Shannon 1.000 (above the "
                       "threshold 0.1)"]


def test_a_new_category_and_a_changed_scale_are_caught_before_anything_is_written(
        tables, tmp_path):
    lines = []
    with pytest.raises(DataAnomalyError, match=r"^1 anomaly in the data against the dataset "
                                                r".*allow_anomalies") as stopped:
        runtime.shard(tables[2], str(tmp_path / "out"), label_column=TABULAR_LABEL_COLUMN,
                      reference_dataset=tables[0], log=lines.append)
    page = stopped.value.page  # the step keeps it as its data report
    assert "<h1>Data validation</h1>" in page and f"&#x27;{NEW_ISLAND}&#x27;" in page
    assert "<td>body_mass_g</td><td>Jensen-Shannon</td>" in page
    assert [line for line in lines if line.startswith("anomaly:")] == [
        f"anomaly: column 'island': 1 value(s) the reference never had, in 12 of 120 rows: "
        f"'{NEW_ISLAND}' (12 rows)"]
    drifted = [line for line in lines if line.startswith("warning: drift:")]
    assert any(line.startswith("warning: drift: column 'body_mass_g': Jensen-Shannon")
               for line in drifted), drifted
    assert os.listdir(tmp_path) == []  # nothing written


def test_allow_anomalies_goes_on_and_records_them(tables, tmp_path):
    out = tmp_path / "out"
    meta, lines = shard(tables[2], out, reference_dataset=tables[0], allow_anomalies=True)
    assert any(line.startswith("anomaly: column 'island'") for line in lines)
    with open(out / data_check.VALIDATION_FILE) as f:
        result = json.load(f)
    assert [a["kind"] for a in result["anomalies"]] == ["unseen values"]
    drifts = {d["column"]: d for d in result["drifts"]}
    assert drifts["body_mass_g"]["measure"] == "Jensen-Shannon"
    assert drifts["body_mass_g"]["value"] > 0.9  # nearly every mass now below the old range
    assert drifts["bill_length_mm"]["value"] < drifts["body_mass_g"]["threshold"]
    assert load_statistics(str(out)).by_name()["body_mass_g"].maximum < 10  # kilograms

    summary = data_check.artifact_summary(str(out), meta, str(tmp_path / "report.html"))
    assert summary["data_validation"]["anomalies"] == [result["anomalies"][0]["message"]]
    assert set(summary["data_validation"]["drifted_columns"]) == {"body_mass_g", "year"}
    assert summary["statistics"]["rows"] == 120
    assert "column 'island': categorical, 4 values in the train split" in " ".join(
        summary["columns"])
    with open(tmp_path / "report.html") as f:
        page = f.read()
    assert NEW_ISLAND in page and "body_mass_g" in page and "Anomalies" in page


def test_the_served_model_is_the_default_reference(tables, tmp_path):
    """The export step copies the model's dataset spec and statistics into the version; the
    next shard step finds the latest version under the export base and checks against it."""
    model = tmp_path / "model"
    model.mkdir()
    os.link(os.path.join(tables[0], METADATA_FILE), model / ma.DATASET_METADATA_FILE)
    os.link(os.path.join(tables[0], STATISTICS_FILE), model / ma.DATASET_STATISTICS_FILE)
    base = tmp_path / "serving"
    for version in (3, 12):
        export_runtime._copy_training_data(str(model), str(base / "penguins" / str(version)))
    lines = []
    with pytest.raises(DataAnomalyError, match="the served version 12"):
        runtime.shard(tables[2], str(tmp_path / "out"), label_column=TABULAR_LABEL_COLUMN,
                      export_base=str(base), serving_model_name="penguins", log=lines.append)
    assert any(line.startswith("anomaly: column 'island'") for line in lines)

    _, lines = shard(tables[2], tmp_path / "other", export_base=str(base),
                     serving_model_name="no-such-model")
    assert any("no served model under" in line for line in lines)


def test_a_reference_that_is_no_dataset_is_one_line(tables, tmp_path):
    with pytest.raises(InvalidInputError, match=r"reference_dataset '.*nowhere' is not a kfdist "
                                                r"dataset: it has no metadata.json"):
        runtime.shard(tables[1], str(tmp_path / "out"), label_column=TABULAR_LABEL_COLUMN,
                      reference_dataset=str(tmp_path / "nowhere"))
    assert not os.path.exists(tmp_path / "out")


def test_a_reference_of_images_is_refused_in_one_line(tables, tmp_path):
    images = str(tmp_path / "digits")
    runtime.shard(write_mnist_sample(str(tmp_path / "mnist"))["dir"], images, num_shards=1,
                  log=lambda _: None)
    assert not os.path.exists(os.path.join(images, STATISTICS_FILE))  # images: none
    with pytest.raises(InvalidInputError, match=r"reference_dataset '.*digits' has no "
                                                r"statistics.json \(a dataset of images"):
        runtime.shard(tables[1], str(tmp_path / "out"), label_column=TABULAR_LABEL_COLUMN,
                      reference_dataset=images)
