"""Kubeflow Pipelines 2.17 itself on the genuine node's bed: its API server, Argo, the v2 driver
and launcher, MLMD and the object store running pipelines as a user's cluster does.

A pipeline is uploaded with `kfp.Client`, run from its uploaded version, and read back: its
steps' pods ran kfdist's runtime image on the node, its artifacts are in KFP's object store
(`minio://mlpipeline/v2/artifacts/...`) and in ML Metadata's lineage, and the same run again is
answered from KFP's cache. `kfdist submit` meets the real API server: a run that succeeds, one
whose step fails, one terminated through the API (its pod stopped), a pipeline the server
refuses and a host that does not answer.
"""


import functools
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cluster import kfp as bed_kfp
from cluster.fixture import wait_for

HERE = Path(__file__).resolve().parent
MLMD = HERE.parent / "cluster" / "mlmd"
_numbers = itertools.count(1)
#: A KFP run of a few small steps on this machine takes about a minute.
RUN_TIMEOUT_S = 600


def _pipeline(path: Path, image: str, name: str, fail: bool = False,
              sleep_s: int = 0) -> Path:
    """Compiles a two-step pipeline on `image`: `say` writes a Dataset and returns a string,
    `read` takes both (raising when `fail`, after sleeping `sleep_s`)."""
    from kfp import compiler, dsl

    @dsl.component(base_image=image, install_kfp_package=False)
    def say(text: str, out: dsl.Output[dsl.Dataset]) -> str:
        with open(out.path, "w") as f:
            f.write(text)
        out.metadata["characters"] = len(text)
        return text.upper()

    @dsl.component(base_image=image, install_kfp_package=False)
    def read(data: dsl.Input[dsl.Dataset], shout: str, fail: bool, sleep_s: int) -> str:
        import time

        time.sleep(sleep_s)
        with open(data.path) as f:
            text = f.read()
        if fail:
            raise ValueError(f"read refuses {text!r}")
        return text + shout

    @dsl.pipeline(name=name)
    def two_steps(text: str = "hello"):
        said = say(text=text)
        read(data=said.outputs["out"], shout=said.outputs["Output"], fail=fail, sleep_s=sleep_s)

    compiler.Compiler().compile(two_steps, str(path))
    return path


@pytest.fixture(scope="module")
def kfp_host(node_bed) -> str:
    return (node_bed.root / bed_kfp.KFP_HOST_FILE).read_text().strip()


@pytest.fixture(scope="module")
def client(kfp_host):
    import kfp

    return kfp.Client(host=kfp_host)


def _poll(predicate, seconds: float, what: str):
    """`wait_for`, asking the API server every 2 s."""
    return wait_for(predicate, seconds, what, every=2.0)


@functools.lru_cache(maxsize=None)
def _mlmd_python() -> str:
    """The MLMD environment's interpreter (`mlmd/install.sh`, which the bed ran already)."""
    return subprocess.run(["bash", str(MLMD / "install.sh")], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]


def _lineage(node_bed, run_id: str) -> dict:
    """What MLMD holds of the run (tests/cluster/mlmd/lineage.py in the MLMD environment)."""
    record = json.loads((node_bed.root / bed_kfp.RECORD).read_text())
    found = subprocess.run([_mlmd_python(), str(MLMD / "lineage.py"), "--host", record["node_ip"],
                            "--port", str(record["mlmd_port"]), run_id],
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    return json.loads(found.stdout)


def _states(lineage: dict) -> dict:
    return {e["task"]: e["state"] for e in lineage["executions"] if e["task"]}


def test_an_uploaded_pipeline_runs_on_the_node_its_artifacts_in_mlmd_and_again_from_cache(
        node_bed, client, kfdist_images, tmp_path):
    name = f"two-steps-{next(_numbers)}"
    package = _pipeline(tmp_path / "two.yaml", kfdist_images["runtime"], name)
    uploaded = client.upload_pipeline(str(package), pipeline_name=name)
    listed = client.list_pipelines(filter=json.dumps({"predicates": [
        {"key": "display_name", "operation": "EQUALS", "string_value": name}]})).pipelines
    assert [p.pipeline_id for p in listed] == [uploaded.pipeline_id]
    version = client.list_pipeline_versions(uploaded.pipeline_id).pipeline_versions[0]
    experiment = client.create_experiment(name)

    runs = []
    for attempt in range(2):
        run = client.run_pipeline(experiment.experiment_id, f"{name}-{attempt}",
                                  pipeline_id=uploaded.pipeline_id,
                                  version_id=version.pipeline_version_id,
                                  params={"text": "kfdist"})
        done = client.wait_for_run_completion(run.run_id, timeout=RUN_TIMEOUT_S)
        assert done.state == "SUCCEEDED", (done.state, done.error)
        runs.append(run.run_id)

    first = _lineage(node_bed, runs[0])
    assert _states(first) == {"say": "COMPLETE", "read": "COMPLETE"}
    dataset = next(a for a in first["artifacts"] if a["type"] == "system.Dataset")
    assert dataset["name"] == "out"
    assert dataset["uri"].startswith(f"minio://mlpipeline/v2/artifacts/{name}/{runs[0]}/say/")
    assert dataset["metadata"]["characters"] == 6
    # The same inputs again: KFP's cache answers both steps; no pod runs them.
    assert _states(_lineage(node_bed, runs[1])) == {"say": "CACHED", "read": "CACHED"}


def _submit(host: str, package: Path, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kfdist", "submit", str(package), "--host",
                             host, "--poll-interval", "2", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def test_kfdist_submit_follows_real_runs_to_their_end_and_names_each_outcome(
        node_bed, client, kfp_host, kfdist_images, tmp_path):
    image = kfdist_images["runtime"]
    good = _pipeline(tmp_path / "good.yaml", image, f"submit-good-{next(_numbers)}")
    bad = _pipeline(tmp_path / "bad.yaml", image, f"submit-bad-{next(_numbers)}", fail=True)
    slow = _pipeline(tmp_path / "slow.yaml", image, f"submit-slow-{next(_numbers)}",
                     sleep_s=RUN_TIMEOUT_S)

    succeeded = _submit(kfp_host, good, "--wait", "--param", "text=ok")
    failed = _submit(kfp_host, bad, "--wait")
    out, err = succeeded.communicate(timeout=RUN_TIMEOUT_S)
    assert succeeded.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["state"] == "SUCCEEDED"
    out, err = failed.communicate(timeout=RUN_TIMEOUT_S)
    assert failed.returncode == 1, err
    result = json.loads(out.splitlines()[-1])
    assert (result["state"], result["failed_steps"], result["terminated"]) == (
        "FAILED", ["read"], False)
    assert err.strip().splitlines()[-1].startswith("kfdist: error: run ")
    assert " ended FAILED: " in err and "failed steps: read" in err

    # Terminated through the API while its step runs: KFP 2.17 reports the run CANCELING, then
    # FAILED; the waiting submit says it was terminated, and Argo stops the step's pod (it keeps
    # the pod, stopped, as it keeps every step's).
    waiting = _submit(kfp_host, slow, "--wait")
    run_id = _poll(lambda: next((r.run_id for r in client.list_runs(
        page_size=50, sort_by="created_at desc").runs or () if r.display_name.startswith(
            slow.name)), None), 60, "the slow run")
    pod = _poll(lambda: _running_step_pod(node_bed, run_id, "read"), RUN_TIMEOUT_S,
                   "the read step's pod running")
    client.terminate_run(run_id)
    out, err = waiting.communicate(timeout=RUN_TIMEOUT_S)
    assert waiting.returncode == 1, err
    result = json.loads(out.splitlines()[-1])
    assert (result["state"], result["terminated"]) == ("FAILED", True)
    assert f"run {run_id} was terminated (it ended FAILED): " in err
    _poll(lambda: _stopped(node_bed, pod), 120, f"pod {pod} stopped")

    refused = tmp_path / "refused.yaml"
    refused.write_text(good.read_text().replace("schemaVersion: 2.1.0", "schemaVersion: 9.9.9"))
    result = _submit(kfp_host, refused)
    out, err = result.communicate(timeout=120)
    assert result.returncode == 1, (out, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("kfdist: error: submitting the run failed: ") and "9.9.9" in last, err
    assert "Traceback" not in err and err.count("kfdist: error") == 1, err

    unreachable = _submit("http://127.0.0.1:9", good)
    out, err = unreachable.communicate(timeout=120)
    assert unreachable.returncode == 1, (out, err)
    assert err.strip().splitlines()[-1].count("127.0.0.1:9") == 1 and "Traceback" not in err, err


def _running_step_pod(node_bed, run_id: str, task: str):
    """The name of the run's pod that executes `task`, once it is Running."""
    pods = json.loads(node_bed.kubectl_run(
        "get", "pods", "-n", "kubeflow", "-l", f"pipeline/runid={run_id}", "-o",
        "json").stdout)["items"]
    for pod in pods:
        node_name = pod["metadata"].get("annotations", {}).get("workflows.argoproj.io/node-name")
        if (node_name or "").endswith(f".{task}.executor") and \
                pod["status"].get("phase") == "Running":
            return pod["metadata"]["name"]
    return None


def _stopped(node_bed, pod: str) -> bool:
    """Whether every container of `pod` has ended (Argo leaves a stopped step's pod in place)."""
    status = json.loads(node_bed.kubectl_run("get", "pod", "-n", "kubeflow", pod, "-o",
                                             "json").stdout)["status"]
    return status.get("phase") in ("Succeeded", "Failed") and all(
        "terminated" in c.get("state", {}) for c in status.get("containerStatuses", ()))


def _object_store(node_bed):
    """A boto3 client of the bed's object store (KFP's `minio://`), with KFP's own keys."""
    import boto3

    from cluster import kfp_config

    record = json.loads((node_bed.root / bed_kfp.RECORD).read_text())
    return boto3.client("s3", endpoint_url=f"http://{record['node_ip']}:{record['s3_port']}",
                        aws_access_key_id=kfp_config.ACCESS_KEY,
                        aws_secret_access_key=kfp_config.SECRET_KEY, region_name="us-east-1")


def test_kfdists_tabular_pipeline_submitted_to_kfp_trains_on_its_store_and_exports_there(
        node_bed, client, kfp_host, tmp_path):
    from sklearn.datasets import load_wine

    store = _object_store(node_bed)
    table = tmp_path / "wine.csv"
    load_wine(as_frame=True).frame.to_csv(table, index=False)
    store.upload_file(str(table), "mlpipeline", "data/wine/wine.csv")
    arguments = ["--param", "source_uri=minio://mlpipeline/data/wine/wine.csv", "--param",
                 "export_base=minio://mlpipeline/serving", "--param", "label_column=target",
                 "--param", "backend=local", "--param", "epochs=3", "--param",
                 "accuracy_threshold=0.5", "--wait"]
    runs = []
    for attempt in range(2):
        submitted = _submit(kfp_host, HERE.parents[1] / "pipelines" / "tabular.yaml", *arguments)
        out, err = submitted.communicate(timeout=RUN_TIMEOUT_S * 2)
        assert submitted.returncode == 0, err
        runs.append(json.loads(out.splitlines()[-1])["run_id"])

    # Served after its data (wine), on KFP's own store: the second run's model was compared with
    # the first one's, served there, and (not worse) exported as the next version.
    exported = store.list_objects_v2(Bucket="mlpipeline", Prefix="serving/")["Contents"]
    versions = sorted({o["Key"].split("/")[2] for o in exported
                       if o["Key"].startswith("serving/wine/")})
    assert len(versions) == 2, [o["Key"] for o in exported]
    assert {f"serving/wine/{v}/saved_model.pb" for v in versions} <= {o["Key"] for o in exported}
    first = _lineage(node_bed, runs[0])
    second = _lineage(node_bed, runs[1])
    # The evaluation's Metrics (the training step logs Metrics of its own).
    evaluated = [a["metadata"] for a in second["artifacts"] if a["type"] == "system.Metrics"
                 and "eval_examples" in a["metadata"]]
    assert [m.get("served_version") for m in evaluated] == [float(versions[0])], evaluated
    assert not any("served_version" in a["metadata"] for a in first["artifacts"]
                   if a["type"] == "system.Metrics")
    assert {"shard-dataset", "train-distributed", "evaluate-model",
            "export-saved-model"} <= set(_states(first))
    kinds = {a["type"] for a in first["artifacts"]}
    assert {"system.Dataset", "system.Model", "system.Metrics", "system.HTML",
            "system.ClassificationMetrics"} <= kinds, kinds
    assert all(a["uri"].startswith("minio://mlpipeline/v2/artifacts/")
               for a in first["artifacts"])
    # The same data again: the shard step comes from KFP's cache.
    assert _states(second)["shard-dataset"] == "CACHED"
