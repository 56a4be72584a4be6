"""The compiled `tabular` pipeline, as `kfdist submit` or the KFP UI runs it, names each model after
its table.

`pipelines/tabular.yaml` runs through kfp.local (each step a process of this Python) twice into
one export base, without `serving_model_name`: on scikit-learn's wine table written as
`wine.csv`, then on its breast cancer table as `breast-cancer.csv` (2 epochs, `mirrored`, a
threshold every model reaches). Each is served under its own table's name, and the second is
compared with no served model: a pipeline-wide default name would have compared the breast
cancer model with the wine model and exported both under `tabular`.
"""

import glob
import json
import os

import pytest

pytestmark = pytest.mark.slow

#: Each table's CSV file, and the name its model must be served under.
TABLES = {"wine": "wine.csv", "breast_cancer": "breast-cancer.csv"}
SERVED = {"wine": "wine", "breast_cancer": "breast-cancer"}


def _write_table(name: str, folder: str) -> str:
    from sklearn import datasets

    frame = getattr(datasets, f"load_{name}")(as_frame=True).frame
    path = os.path.join(folder, TABLES[name])
    frame.rename(columns={"target": "label"}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from kfp import components, local

    from kfdist.pipelines import registry

    folder = str(tmp_path_factory.mktemp("served-names"))
    export_base = os.path.join(folder, "serving")
    pipeline = components.load_component_from_file(registry.compiled_path("tabular"))
    local.init(runner=local.SubprocessRunner(use_venv=False),
               pipeline_root=os.path.join(folder, "pipeline_root"), raise_on_error=True,
               enable_caching=False)
    outputs = {}
    for name in TABLES:
        task = pipeline(source_uri=_write_table(name, folder), export_base=export_base,
                        epochs=2, strategy="mirrored", backend="local",
                        accuracy_threshold=0.0)
        outputs[name] = task.outputs
    return export_base, outputs


def test_each_table_is_served_under_its_own_name(runs):
    export_base, outputs = runs
    assert all(outputs[name]["blessed"] for name in TABLES)
    assert sorted(os.listdir(export_base)) == sorted(SERVED.values())
    for name in SERVED.values():
        [version] = os.listdir(os.path.join(export_base, name))
        assert os.path.isfile(os.path.join(export_base, name, version, "saved_model.pb"))


def test_each_model_is_compared_with_its_own_name_where_nothing_is_served_yet(runs):
    export_base, _ = runs
    pipeline_root = os.path.join(os.path.dirname(export_base), "pipeline_root")
    reasons = []
    for path in glob.glob(os.path.join(pipeline_root, "*", "evaluate-model", "blessing")):
        with open(path) as f:
            reasons.append(json.load(f)["reason"])
    assert sorted(r.split("; ", 1)[1] for r in reasons) == sorted(
        f"no served model under {os.path.join(export_base, name)} to compare with"
        for name in SERVED.values())
