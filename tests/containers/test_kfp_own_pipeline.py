"""A pipeline of a user's own around kfdist's components, run by Kubeflow Pipelines 2.17 on the
genuine node: what KFP's real driver and Argo do to kfdist's steps there.

The pipeline prepares its table in a step of its own and hands kfdist's shard step that
`Dataset` (`source`); its training task passes no run id (kfdist's pipelines pass KFP's
placeholders; a user's may not), so the step takes its run and task from its own pod.
- Task settings: a GPU limit, a toleration, a node selector and a variable set on the training
  task reach every replica of the TFJob the step creates (KFP's driver hands them over as the
  step's `TaskConfig`). The node has no GPU and no such label: kube-scheduler leaves the
  replicas Pending, and the step's timeout deletes the job, saying why.
- Retry: the training task has `set_retry(1)`. Its step's container is SIGKILLed mid-training
  (no clean-up runs, as when a node fails it); Argo starts the step again, which re-attaches to
  the TFJob the first attempt created and still trains: one job, its replicas started once, both
  attempts' pods its owners, the run SUCCEEDED.
"""

import json
import uuid

from cluster import node as genuine_node
from cluster.fixture import wait_for
from containers.kfp_bed_runs import RUN_TIMEOUT_S, _submit
from containers.test_kfp_on_the_bed import _lineage, _states
from containers.test_kfp_on_the_bed import job_pods, run_of, step_log, step_pods
from containers.test_kfp_on_the_bed import kubeflow_objects as _objects
from kfdist.components.train_distributed.kubernetes.build.job_spec import RUN_ID_LABEL
from unit.test_task_config import GPU, GPU_NODES, GPU_TOLERATION

TEAM_ENV = ("TEAM", "vision")


def _compiled(path, image: str, *, gpu: bool, epochs: int, timeout_seconds: int = 86400):
    """A user's pipeline: `make_table` writes a CSV `Dataset`, kfdist shards it (`source`) and
    trains on it as a TFJob of two workers; `gpu` sets the GPU task settings, else a retry."""
    from kfp import compiler, dsl, kubernetes

    from kfdist.components.common.kfp_object_store import SECRET_KEYS, SECRET_NAME
    from kfdist.components.shard_dataset.component import shard_dataset
    from kfdist.components.train_distributed.component import train_distributed

    @dsl.component(base_image=image, install_kfp_package=False)
    def make_table(rows: int, table: dsl.Output[dsl.Dataset]):
        import random

        rng = random.Random(7)
        with open(table.path, "w") as f:
            f.write("x1,x2,label\n")
            for _ in range(rows):
                label = rng.randrange(2)
                f.write(f"{rng.gauss(2 * label, 1):.4f},{rng.gauss(-2 * label, 1):.4f},{label}\n")

    @dsl.pipeline(name=path.stem)
    def own_pipeline():
        table = make_table(rows=1000)
        shard = shard_dataset(source=table.outputs["table"], label_column="label",
                              source_format="csv", num_shards=2)
        train = train_distributed(dataset=shard.outputs["dataset"], backend="tfjob", workers=2,
                                  epochs=epochs, early_stopping_patience=0,
                                  timeout_seconds=timeout_seconds)
        # The step stages the job beside the dataset on KFP's store: it needs the store's keys.
        kubernetes.use_secret_as_env(train, secret_name=SECRET_NAME, secret_key_to_env={
            key: variable for variable, key in SECRET_KEYS.items()})
        if gpu:
            train.set_accelerator_type(GPU).set_accelerator_limit(1)
            train.set_env_variable(*TEAM_ENV)
            kubernetes.add_toleration(train, **GPU_TOLERATION)
            kubernetes.add_node_selector(train, *GPU_NODES)
        else:
            train.set_retry(1)

    compiler.Compiler().compile(own_pipeline, str(path))
    return path


def _package(folder, name: str):
    """Where to compile the pipeline `name`: a name of its own (its runs' names begin with it)."""
    return folder / f"{name}-{uuid.uuid4().hex[:6]}.yaml"


def _run_result(submitted) -> dict:
    out, err = submitted.communicate(timeout=RUN_TIMEOUT_S * 2)
    return dict(json.loads(out.splitlines()[-1]), returncode=submitted.returncode, err=err)


def _unschedulable_replicas(node_bed, job: dict) -> list:
    pods = job_pods(node_bed, job, "worker")
    return pods if len(pods) == 2 and all(any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in p["status"].get("conditions", [])) for p in pods) else []


def test_the_training_tasks_settings_reach_every_replica_of_its_tfjob(
        node_bed, kfp_host, kfdist_images, tmp_path):
    package = _compiled(_package(tmp_path, "own-gpu-training"), kfdist_images["runtime"],
                        gpu=True, epochs=1, timeout_seconds=60)
    submitted = _submit(kfp_host, package, "--wait")
    job = wait_for(lambda: next((j for j in _objects(node_bed, "tfjob", RUN_ID_LABEL)
                                 if _unschedulable_replicas(node_bed, j)), None),
                   RUN_TIMEOUT_S, "a TFJob whose replicas the scheduler cannot place", every=2.0)
    replicas = _unschedulable_replicas(node_bed, job)
    result = _run_result(submitted)
    assert result["returncode"] == 1 and result["failed_steps"] == ["train-distributed"], result
    run_id = result["run_id"]

    # Named after the run and task its pod belongs to: the pipeline passed neither.
    from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for

    assert job["metadata"]["labels"][RUN_ID_LABEL] == run_id
    assert job["metadata"]["name"] == job_name_for(run_id, "train-distributed")
    templates = [r["template"]["spec"] for r in job["spec"]["tfReplicaSpecs"].values()]
    for spec in templates + [p["spec"] for p in replicas]:
        assert GPU_TOLERATION in spec["tolerations"], spec.get("tolerations")
        assert spec["nodeSelector"][GPU_NODES[0]] == GPU_NODES[1]
        [container] = spec["containers"]
        assert str(container["resources"]["limits"][GPU]) == "1"
        assert {"name": TEAM_ENV[0], "value": TEAM_ENV[1]} in container["env"]
    message = next(c["message"] for c in replicas[0]["status"]["conditions"]
                   if c["type"] == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in message or "node affinity/selector" in message, message
    # The step's own pod waits on the job: the variable, but no GPU.
    [step] = step_pods(node_bed, run_id, "train-distributed")
    [main] = [c for c in step["spec"]["containers"] if c["name"] == "main"]
    assert GPU not in main.get("resources", {}).get("limits", {})
    assert {"name": TEAM_ENV[0], "value": TEAM_ENV[1]} in main["env"]
    log = step_log(node_bed, step)
    assert "did not finish within 60 s and was deleted" in log and "Unschedulable" in log, \
        log[-3000:]
    wait_for(lambda: not _objects(node_bed, "tfjob", f"{RUN_ID_LABEL}={run_id}"), 60,
             "the TFJob deleted")
    # The shard step read the upstream step's Dataset, and named the model after it.
    states = _states(_lineage(node_bed, run_id))
    assert states["make-table"] == states["shard-dataset"] == "COMPLETE", states
    [shard] = step_pods(node_bed, run_id, "shard-dataset")
    assert "serving name: table (after the data" in step_log(node_bed, shard)


def test_a_retried_training_step_reattaches_to_its_running_tfjob(
        node_bed, client, kfp_host, kfdist_images, tmp_path):
    package = _compiled(_package(tmp_path, "own-retried-training"), kfdist_images["runtime"],
                        gpu=False, epochs=90)
    submitted = _submit(kfp_host, package, "--wait")
    run_id = run_of(client, package)

    def training_attempt():
        for job in _objects(node_bed, "tfjob", f"{RUN_ID_LABEL}={run_id}"):
            for pod in step_pods(node_bed, run_id, "train-distributed"):
                if "[worker-0] epoch 2/" in step_log(node_bed, pod):
                    return job, pod
        return None

    created, first = wait_for(training_attempt, RUN_TIMEOUT_S, "the step's job training",
                              every=2.0)
    name = created["metadata"]["name"]
    replicas = {p["metadata"]["uid"] for p in job_pods(node_bed, created)}
    [main] = [c for c in first["status"]["containerStatuses"] if c["name"] == "main"]
    genuine_node.kill_container(node_bed, main["containerID"])

    result = _run_result(submitted)
    assert result["returncode"] == 0 and result["state"] == "SUCCEEDED", result
    attempts = sorted(step_pods(node_bed, run_id, "train-distributed"),
                      key=lambda p: p["metadata"]["creationTimestamp"])
    assert [p["metadata"]["uid"] for p in attempts][0] == first["metadata"]["uid"]
    assert len(attempts) == 2 and attempts[0]["status"]["phase"] == "Failed"
    retry_log = step_log(node_bed, attempts[1])
    assert f"Re-attaching to TFJob kubeflow/{name} " in retry_log, retry_log[-3000:]
    [job] = _objects(node_bed, "tfjob", f"{RUN_ID_LABEL}={run_id}")
    assert job["metadata"]["uid"] == created["metadata"]["uid"]
    assert ("Succeeded", "True") in [(c["type"], c["status"]) for c in job["status"]["conditions"]]
    assert [o["uid"] for o in job["metadata"]["ownerReferences"]] == [
        p["metadata"]["uid"] for p in attempts]
    # Its replicas were started once: the job's pods are the ones the first attempt saw.
    assert {p["metadata"]["uid"] for p in job_pods(node_bed, job)} <= replicas
    assert "[worker-0] epoch 90/90" in retry_log, retry_log[-3000:]
