"""The name a model is served under: after its data unless one is given, in every pipeline.

The rule (`components/common/serving_name.py`) is applied by the shard step, the first
step that looks the served model up (its training data is the table's reference); the
name it returns is the one the evaluation compares with and the export writes under. A
compiled pipeline's `serving_model_name` is empty by default, so scikit-learn's wine
table, written as `wine.csv`, is served as `wine`, not as the pipeline's `tabular`.
"""

from __future__ import annotations

import pytest
from kfp import dsl

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.common.serving_name import (
    name_after_data, serving_name, serving_name_line)
from kfdist.components.shard_dataset.component import shard_dataset


@pytest.mark.parametrize("source, name", [
    ("data/wine.csv", "wine"),
    ("data/breast-cancer/", "breast-cancer"),
    ("/home/me/cars/train.csv", "cars"),                      # a split's file: its folder
    ("gs://bucket/tables/penguins.csv.gz", "penguins"),
    ("gs://bucket/flowers/train-*.tfrecord", "flowers"),       # a wildcard: its folder
    ("/data/Vega Cars (2024).CSV", "vega-cars-2024"),          # what a path part cannot hold
    ("/data/training_data.csv", "training_data"),              # names no split
    ("/test/", None),
])
def test_the_serving_name_is_made_after_the_data(source, name):
    assert name_after_data(source) == name


def test_a_given_name_wins_else_the_data_else_the_pipeline(tmp_path, monkeypatch):
    assert serving_name("cellar", "/data/wine.csv", "tabular") == "cellar"
    assert serving_name(None, "/data/wine.csv", "tabular") == "wine"
    assert serving_name(None, "gs://train/*.csv", "tabular") == "tabular"  # the data gives none
    (tmp_path / "Wine Data").mkdir()
    monkeypatch.chdir(tmp_path / "Wine Data")
    assert serving_name(None, "train.csv", "tabular") == "wine-data"  # relative: from here
    assert serving_name_line(None, "/data/wine.csv", "tabular") == (
        "serving name: wine (after the data; serving_model_name sets another)")
    assert serving_name_line(None, "gs://train/*.csv", "tabular") == (
        "serving name: tabular (gs://train/*.csv gives no name; serving_model_name sets another)")
    assert serving_name_line("cellar", "/data/wine.csv", "tabular") == (
        "serving name: cellar (serving_model_name)")


def test_a_name_a_serving_layout_cannot_hold_is_refused():
    with pytest.raises(InvalidInputError, match=r"serving_model_name='wine/v2' is invalid"):
        serving_name("wine/v2", "/data/wine.csv", "tabular")


def _wine_csv(path) -> str:
    from sklearn.datasets import load_wine

    path.parent.mkdir(parents=True, exist_ok=True)
    load_wine(as_frame=True).frame.rename(columns={"target": "label"}).to_csv(path, index=False)
    return str(path)


def _shard(tmp_path, run: str, source: str, **params):
    """The shard step's own function (as the pipeline runs it), on a fresh output."""
    return shard_dataset.python_func(
        source_uri=source, dataset=dsl.Dataset(uri=str(tmp_path / run / "dataset")),
        data_report=dsl.HTML(uri=str(tmp_path / run / "data_report.html")), num_shards=1,
        export_base=str(tmp_path / "serving"), default_model_name="tabular", **params)


def test_the_shard_step_names_the_model_after_its_table_and_looks_it_up_there(tmp_path,
                                                                            capsys):
    wine = _wine_csv(tmp_path / "tables" / "wine.csv")
    assert _shard(tmp_path, "a", wine).serving_model_name == "wine"
    log = capsys.readouterr().out
    assert "serving name: wine (after the data; serving_model_name sets another)" in log
    assert f"no served model under {tmp_path / 'serving' / 'wine'} yet" in log
    split = _wine_csv(tmp_path / "Cellar 2024" / "train.csv")
    assert _shard(tmp_path, "b", split).serving_model_name == "cellar-2024"
    given = _shard(tmp_path, "c", wine, serving_model_name="cellar")
    assert given.serving_model_name == "cellar"
    assert f"no served model under {tmp_path / 'serving' / 'cellar'} yet" in capsys.readouterr().out


def test_the_shard_step_refuses_a_bad_name_before_writing(tmp_path):
    wine = _wine_csv(tmp_path / "tables" / "wine.csv")
    with pytest.raises(InvalidInputError, match="serving_model_name='a b' is invalid"):
        _shard(tmp_path, "a", wine, serving_model_name="a b")
    assert not (tmp_path / "a").exists()
