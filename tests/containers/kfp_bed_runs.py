"""The Kubeflow Pipelines bed's shared fixtures (a pytest plugin: `tests/conftest.py`'s
`pytest_plugins`): the API's address, a `kfp.Client`, the MNIST sample on KFP's store, the
Horovod image on the node, and the tabular pipeline's two runs on wine that
`test_kfp_on_the_bed` and the UI's tests both read, each made once in a session. A fixture a
test module imported from another module would be a second fixture of that module, run again.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cluster import kfp as bed_kfp

HERE = Path(__file__).resolve().parent
#: A KFP run of a few small steps on this machine takes about a minute.
RUN_TIMEOUT_S = 600
REPO = HERE.parents[1]
TABULAR = REPO / "pipelines" / "tabular.yaml"
#: Where `on_the_store` puts the MNIST sample in KFP's bucket.
MNIST = "data/mnist"


@pytest.fixture(scope="session")
def kfp_host(node_bed) -> str:
    return (node_bed.root / bed_kfp.KFP_HOST_FILE).read_text().strip()


@pytest.fixture(scope="session")
def client(kfp_host):
    import kfp

    return kfp.Client(host=kfp_host)


def _submit(host: str, package: Path, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kfdist", "submit", str(package), "--host",
                             host, "--poll-interval", "2", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _object_store(node_bed):
    """A boto3 client of the bed's object store (KFP's `minio://`), with KFP's own keys."""
    import boto3

    from cluster import kfp_config

    record = json.loads((node_bed.root / bed_kfp.RECORD).read_text())
    return boto3.client("s3", endpoint_url=f"http://{record['node_ip']}:{record['s3_port']}",
                        aws_access_key_id=kfp_config.ACCESS_KEY,
                        aws_secret_access_key=kfp_config.SECRET_KEY, region_name="us-east-1")


def _uploaded_and_run(client, package: Path, params: dict) -> str:
    """Uploads `package` as a pipeline of its own, runs its uploaded version with `params` (as
    the UI does) and returns the run's id once it SUCCEEDED."""
    name = f"kfdist-{package.stem}-{uuid.uuid4().hex[:8]}"
    uploaded = client.upload_pipeline(str(package), pipeline_name=name)
    listed = client.list_pipelines(filter=json.dumps({"predicates": [
        {"key": "display_name", "operation": "EQUALS", "string_value": name}]})).pipelines
    assert [p.pipeline_id for p in listed] == [uploaded.pipeline_id]
    version = client.list_pipeline_versions(uploaded.pipeline_id).pipeline_versions[0]
    run = client.run_pipeline(client.create_experiment(name).experiment_id, name,
                              pipeline_id=uploaded.pipeline_id,
                              version_id=version.pipeline_version_id, params=params)
    done = client.wait_for_run_completion(run.run_id, timeout=RUN_TIMEOUT_S * 2)
    assert done.state == "SUCCEEDED", (done.state, done.error)
    return run.run_id


@dataclasses.dataclass(frozen=True)
class TabularRuns:
    """The tabular pipeline's two runs on wine: `blessed` uploaded and run from its version,
    `unblessed` submitted with `kfdist submit` and asked to beat the first one's model by 1."""
    blessed: str
    unblessed: str


@pytest.fixture(scope="session")
def tabular_runs(node_bed, kfp_host, client, tmp_path_factory) -> TabularRuns:
    """Runs them once in a session (the UI's tests read the second one too)."""
    from sklearn.datasets import load_wine

    store = _object_store(node_bed)
    table = tmp_path_factory.mktemp("wine") / "wine.csv"
    load_wine(as_frame=True).frame.to_csv(table, index=False)
    store.upload_file(str(table), "mlpipeline", "data/wine/wine.csv")
    params = {"source_uri": "minio://mlpipeline/data/wine/wine.csv",
              "export_base": "minio://mlpipeline/serving", "label_column": "target",
              "backend": "local", "epochs": 3, "accuracy_threshold": 0.5,
              "slice_columns": ["alcohol"]}
    blessed = _uploaded_and_run(client, TABULAR, params)
    # The same data again, the model to be better than the served one's by 1 (no model is).
    params["min_improvement"] = 1
    flags = (("--param", f"{k}={v if isinstance(v, str) else json.dumps(v)}")
             for k, v in params.items())
    submitted = _submit(kfp_host, TABULAR, "--wait", *itertools.chain.from_iterable(flags))
    out, err = submitted.communicate(timeout=RUN_TIMEOUT_S * 2)
    assert submitted.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["state"] == "SUCCEEDED"
    return TabularRuns(blessed, json.loads(out.splitlines()[-1])["run_id"])


@pytest.fixture(scope="session")
def on_the_store(node_bed, tmp_path_factory) -> str:
    """The MNIST sample on KFP's store, kfdist's RBAC and runtimes installed as a user does."""
    from kfdist.sample_data import write_mnist_sample

    for kustomization in ("manifests/overlays/standalone", "manifests/runtimes"):
        node_bed.kubectl_run("apply", "--server-side", "-k", str(REPO / kustomization))
    folder = tmp_path_factory.mktemp("mnist")
    write_mnist_sample(str(folder))
    store = _object_store(node_bed)
    for path in sorted(folder.iterdir()):
        store.upload_file(str(path), "mlpipeline", f"{MNIST}/{path.name}")
    return f"minio://mlpipeline/{MNIST}"
