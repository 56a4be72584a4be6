"""Kubeflow Pipelines 2.17 itself on the genuine node's bed: its API server, Argo, the v2 driver
and launcher, MLMD and the object store running pipelines as a user's cluster does.

kfdist's tabular pipeline is uploaded with `kfp.Client`, run from its uploaded version, then
submitted again with `kfdist submit`: its steps' pods ran kfdist's runtime image on the node, its
data, model and artifacts are in KFP's object store (`minio://mlpipeline/...`) and in ML
Metadata's lineage, the second run's shard step is answered from KFP's cache, and its model is
compared with the first one's, served there. `kfdist submit` meets the real API server: a run
whose step fails, one terminated through the API (its pod stopped), a pipeline the server
refuses and a host that does not answer.
"""


import functools
import itertools
import json
import re
import subprocess
from pathlib import Path

from cluster import api_reads
from cluster import kfp as bed_kfp
from cluster.fixture import wait_for
from containers.kfp_bed_runs import HERE, RUN_TIMEOUT_S, _object_store, _submit

MLMD = HERE.parent / "cluster" / "mlmd"
_numbers = itertools.count(1)


def _pipeline(path: Path, image: str, name: str, fail: bool = False,
              sleep_s: int = 0) -> Path:
    """Compiles a two-step pipeline on `image`: `say` writes a Dataset and returns a string,
    `read` takes both (raising when `fail`, after sleeping `sleep_s`)."""
    from kfp import compiler, dsl

    @dsl.component(base_image=image, install_kfp_package=False)
    def say(text: str, out: dsl.Output[dsl.Dataset]) -> str:
        with open(out.path, "w") as f:
            f.write(text)
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





def test_kfdist_submit_follows_real_runs_to_their_end_and_names_each_outcome(
        node_bed, client, kfp_host, kfdist_images, tmp_path):
    image = kfdist_images["runtime"]
    bad = _pipeline(tmp_path / "bad.yaml", image, f"submit-bad-{next(_numbers)}", fail=True)
    slow = _pipeline(tmp_path / "slow.yaml", image, f"submit-slow-{next(_numbers)}",
                     sleep_s=RUN_TIMEOUT_S)

    # (A run that succeeds, and its exit status 0: the tabular pipeline's test.)
    failed = _submit(kfp_host, bad, "--wait")
    waiting = _submit(kfp_host, slow, "--wait")
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
    run_id = run_of(client, slow)
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
    refused.write_text(bad.read_text().replace("schemaVersion: 2.1.0", "schemaVersion: 9.9.9"))
    result = _submit(kfp_host, refused)
    out, err = result.communicate(timeout=120)
    assert result.returncode == 1, (out, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("kfdist: error: submitting the run failed: ") and "9.9.9" in last, err
    assert "Traceback" not in err and err.count("kfdist: error") == 1, err

    unreachable = _submit("http://127.0.0.1:9", bad)
    out, err = unreachable.communicate(timeout=120)
    assert unreachable.returncode == 1, (out, err)
    assert err.strip().splitlines()[-1].count("127.0.0.1:9") == 1 and "Traceback" not in err, err


def kubeflow_objects(node_bed, kind: str, selector: str = "") -> list:
    """The `kind` objects of namespace kubeflow (where KFP's steps run), by label `selector`:
    read from the API server (the tests poll them; `cluster.api_reads`)."""
    return api_reads.get(node_bed.layout, kind, "kubeflow", selector=selector)["items"]


def step_pods(node_bed, run_id: str, task: str) -> list:
    """The run's pods that execute `task` (Argo's node name `<...>.<task>.executor`, `(n)`
    appended for each attempt of a task that may be retried)."""
    node = re.compile(rf"\.{re.escape(task)}\.executor(\(\d+\))?$")
    return [pod for pod in kubeflow_objects(node_bed, "pod", f"pipeline/runid={run_id}")
            if node.search(pod["metadata"].get("annotations", {}).get(
                "workflows.argoproj.io/node-name", ""))]


def job_pods(node_bed, job: dict, replica: str = "") -> list:
    """The pods of namespace kubeflow whose names say they are `job`'s (of its `replica` type,
    when given: `<job>-<replica>-<index>`)."""
    prefix = f"{job['metadata']['name']}-{replica + '-' if replica else ''}"
    return [pod for pod in kubeflow_objects(node_bed, "pod")
            if pod["metadata"]["name"].startswith(prefix)]


def step_log(node_bed, pod: dict) -> str:
    """The log of a step's pod's `main` container (the component, under KFP's launcher)."""
    return api_reads.log(node_bed.layout, "kubeflow", pod["metadata"]["name"], "main")


def run_of(client, package: Path) -> str:
    """The id of the newest run submitted from `package` (its runs' names begin with the
    file's name), once the API lists it."""
    return _poll(lambda: next((r.run_id for r in client.list_runs(
        page_size=50, sort_by="created_at desc").runs or () if r.display_name.startswith(
            package.name)), None), 60, f"a run of {package.name}")


def _running_step_pod(node_bed, run_id: str, task: str):
    """The name of the run's pod that executes `task`, once it is Running."""
    return next((pod["metadata"]["name"] for pod in step_pods(node_bed, run_id, task)
                 if pod["status"].get("phase") == "Running"), None)


def _stopped(node_bed, pod: str) -> bool:
    """Whether every container of `pod` has ended (Argo leaves a stopped step's pod in place)."""
    status = api_reads.get(node_bed.layout, "pod", "kubeflow", pod)["status"]
    return status.get("phase") in ("Succeeded", "Failed") and all(
        "terminated" in c.get("state", {}) for c in status.get("containerStatuses", ()))


def test_kfdists_tabular_pipeline_uploaded_and_submitted_runs_on_kfps_store_and_exports_if_blessed(
        node_bed, tabular_runs):
    store = _object_store(node_bed)
    runs = [tabular_runs.blessed, tabular_runs.unblessed]
    # Served after its data (wine), on KFP's own store: the second run's model was compared with
    # the first one's, served there, and, not blessed, not exported: the run SUCCEEDED without
    # its `blessed` condition's export step.
    exported = store.list_objects_v2(Bucket="mlpipeline", Prefix="serving/")["Contents"]
    versions = sorted({o["Key"].split("/")[2] for o in exported
                       if o["Key"].startswith("serving/wine/")})
    assert len(versions) == 1, [o["Key"] for o in exported]
    assert f"serving/wine/{versions[0]}/saved_model.pb" in {o["Key"] for o in exported}
    first = _lineage(node_bed, runs[0])
    second = _lineage(node_bed, runs[1])
    assert _states(first)["export-saved-model"] == "COMPLETE"
    assert "export-saved-model" not in _states(second), _states(second)
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
    dataset = next(a for a in first["artifacts"] if a["type"] == "system.Dataset")
    assert f"/{runs[0]}/shard-dataset/" in dataset["uri"], dataset
    # The same data again: the shard step comes from KFP's cache.
    assert _states(second)["shard-dataset"] == "CACHED"
