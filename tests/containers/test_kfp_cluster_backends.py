"""kfdist's mnist pipeline submitted to Kubeflow Pipelines 2.17 on the genuine node, its training
step launching a TrainJob through the operators' own controllers (a TFJob in `test_kfp_ui`,
whose run starts from the UI and is checked here too: `check_trained`).

As a user's cluster runs it: kfdist's RBAC for KFP's `pipeline-runner` (`manifests/overlays/
standalone`) and its TensorFlow runtime (`manifests/runtimes`) applied as the README says, the
MNIST files on KFP's object store (`minio://mlpipeline/...`), no `work_uri`: the replicas share a
folder beside the dataset there, with KFP's `mlpipeline-minio-artifact` keys. Each run
SUCCEEDED; the job carries the run's id the real driver gave the step, its controller marked it
done, its pods ran on the node, the step's log is the leader's, the model was blessed at the
pipeline's threshold and exported to the store, and its TensorBoard curves are on the work
location. With `backend=local` the replicas are processes of the step's own pod. The images
pipeline trains the PNG digits as a TFJob too, and the program pipeline a user's own program
(given inline) as a TFJob, its dataset read in place on the store. A run terminated through
KFP's API while its TFJob trains leaves neither the TFJob nor its replicas.
"""

import json
import re

from cluster.fixture import wait_for
from cluster.node_config import NODE_NAME
from containers.kfp_bed_runs import REPO, RUN_TIMEOUT_S, _object_store, _submit
from containers.test_kfp_on_the_bed import _lineage, job_pods, step_log, step_pods
from containers.test_kfp_on_the_bed import kubeflow_objects as _objects
from kfdist.components.train_distributed.kubernetes.build.job_spec import RUN_ID_LABEL

#: {backend: (the job's kind, its replicas' name, the condition its controller marks it done with)}
JOBS = {"tfjob": ("tfjob", "worker", ("Succeeded", "TFJobSucceeded")),
        "mpijob": ("mpijob", "launcher", ("Succeeded", "MPIJobSucceeded")),
        "trainjob": ("trainjob", "node", ("Complete", "AllJobsCompleted"))}


def _mnist_run(kfp_host: str, on_the_store: str, backend: str, *params: str) -> str:
    """Submits the mnist pipeline on the store's sample, 3 epochs on `backend`, exported under
    `serving-BACKEND/`; returns the run's id once it SUCCEEDED."""
    submitted = _submit(kfp_host, REPO / "pipelines" / "mnist.yaml", "--wait",
                        "--param", f"source_uri={on_the_store}",
                        "--param", f"export_base=minio://mlpipeline/serving-{backend}",
                        "--param", f"backend={backend}", "--param", "epochs=3", *params)
    out, err = submitted.communicate(timeout=RUN_TIMEOUT_S)
    assert submitted.returncode == 0, err
    return json.loads(out.splitlines()[-1])["run_id"]


def test_mnist_on_kfp_trains_as_a_trainjob_and_is_exported(node_bed, kfp_host, on_the_store):
    """(The TFJob's run is the UI's: `test_kfp_ui`.)"""
    check_trained(node_bed, _mnist_run(kfp_host, on_the_store, "trainjob"), "trainjob",
                  epochs=3, export_prefix="serving-trainjob/mnist/")


def check_trained(node_bed, run_id: str, backend: str, epochs: int, export_prefix: str) -> None:
    """The run's job done, as its operator's own controller says, its two replicas on the node,
    the leader's lines (only) in the step's log, its TensorBoard curves on the work location,
    the model blessed at the pipeline's threshold and exported under EXPORT_PREFIX."""
    kind, replica, _ = JOBS[backend]
    job = _job_done(node_bed, backend, run_id)
    log = _step_log(node_bed, run_id, "train-distributed")
    assert f"{backend} backend: " in log, log[-3000:]
    # Only the leader's own lines are streamed into the step's log.
    assert f"[{replica}-0] epoch {epochs}/{epochs}" in log and f"[{replica}-1]" not in log
    if kind == "trainjob":  # the leader's progress, through Trainer's status API
        assert job["status"]["trainerStatus"]["progressPercentage"] == 100
        assert "Progress 100%, about 0 s left" in log, log[-3000:]
    work = re.search(r"work location (minio://\S+)", log).group(1)
    bucket, prefix = work.removeprefix("minio://").split("/", 1)
    curves = _object_store(node_bed).list_objects_v2(
        Bucket=bucket, Prefix=f"{prefix}/model/tensorboard/train/")
    assert curves.get("KeyCount", 0) >= 1, work
    _blessed_and_exported(node_bed, run_id, 0.9, export_prefix)


def _job_done(node_bed, backend: str, run_id: str, kept=(2,)) -> dict:
    """The run's one job of `backend`, marked done by its operator's own controller, as many of
    its replicas' pods on the node as one of `kept` (one still running when the leader's ended is
    deleted by the operator: its clean-pod policy)."""
    kind, replica, done = JOBS[backend]
    [job] = _objects(node_bed, kind, f"{RUN_ID_LABEL}={run_id}")
    conditions = [(c["type"], c.get("reason")) for c in job["status"]["conditions"]
                  if c["status"] == "True"]
    assert done in conditions, conditions  # written by the operator's own controller
    replicas = job_pods(node_bed, job, replica)
    assert len(replicas) in kept and {p["spec"]["nodeName"] for p in replicas} == {NODE_NAME}
    return job


def _blessed_and_exported(node_bed, run_id: str, threshold: float, export_prefix: str) -> None:
    """The run's evaluation reached `threshold`, and a SavedModel is under EXPORT_PREFIX in
    KFP's bucket."""
    evaluated = [a["metadata"] for a in _lineage(node_bed, run_id)["artifacts"]
                 if a["type"] == "system.Metrics" and "eval_examples" in a["metadata"]]
    assert [m["accuracy"] >= threshold for m in evaluated] == [True], evaluated
    exported = _object_store(node_bed).list_objects_v2(Bucket="mlpipeline", Prefix=export_prefix)
    assert any(o["Key"].endswith("/saved_model.pb") for o in exported.get("Contents", ())), \
        exported


def test_mnist_on_kfp_trains_with_horovod_as_an_mpijob_and_is_exported(
        node_bed, kfp_host, on_the_store, kfdist_images):
    """`mpijob`: Horovod under `mpirun` in kfdist's Horovod image, its launcher reaching the
    workers over ssh through the node's cluster DNS, done as the MPI Operator's own controller
    says."""
    run_id = _mnist_run(kfp_host, on_the_store, "mpijob", "--param", "strategy=horovod")
    job = _job_done(node_bed, "mpijob", run_id, kept=(1,))  # the workers' sshd were stopped
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "image"] == kfdist_images["horovod"]
    log = _step_log(node_bed, run_id, "train-distributed")
    assert "mpijob backend: " in log and "epoch 3/3" in log, log[-3000:]
    _blessed_and_exported(node_bed, run_id, 0.9, "serving-mpijob/mnist/")


def test_mnist_on_kfp_with_backend_local_trains_in_the_steps_own_pod(node_bed, kfp_host,
                                                                     on_the_store):
    """`local`: the two replicas are processes of the training step's pod; no job is made."""
    run_id = _mnist_run(kfp_host, on_the_store, "local")
    for kind in ("tfjob", "trainjob", "mpijob", "pytorchjob"):
        assert not _objects(node_bed, kind, f"{RUN_ID_LABEL}={run_id}"), kind
    log = _step_log(node_bed, run_id, "train-distributed")
    assert "started 2 local replica process(es)" in log, log[-3000:]
    assert "[worker-0] epoch 3/3" in log and "[worker-1] " in log, log[-3000:]
    _blessed_and_exported(node_bed, run_id, 0.9, "serving-local/mnist/")


#: A user's training program, given inline (`python -c`) to the program pipeline's `command`:
#: MultiWorkerMirrored Keras `fit` on the dataset `kfdist.program` reads, its SavedModel saved.
PROGRAM = """
import os
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf
from kfdist import program
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.Input(shape=program.input_shape()), tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(program.num_classes(), activation="softmax")])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.003),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(program.dataset("train", batch_size=64).repeat(), epochs=4, steps_per_epoch=20,
          verbose=2)
program.save_model(model)
print("the program saved its model", flush=True)
"""


def test_a_users_program_pipeline_on_kfp_trains_as_a_tfjob_and_is_exported(
        node_bed, kfp_host, on_the_store):
    """The program pipeline, its `command` a user's program: each replica of the TFJob runs
    it; the leader's SavedModel is evaluated, blessed and exported."""
    submitted = _submit(kfp_host, REPO / "pipelines" / "program.yaml", "--wait",
                        "--param", f"source_uri={on_the_store}",
                        "--param", "export_base=minio://mlpipeline/serving-program",
                        "--param", "backend=tfjob", "--param", "accuracy_threshold=0.8",
                        "--param", f"command={json.dumps(['python', '-c', PROGRAM])}")
    out, err = submitted.communicate(timeout=RUN_TIMEOUT_S)
    assert submitted.returncode == 0, err
    run_id = json.loads(out.splitlines()[-1])["run_id"]
    job = _job_done(node_bed, "tfjob", run_id, kept=(1, 2))
    assert job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2
    log = _step_log(node_bed, run_id, "train-program")
    assert "[worker-0] Epoch 4/4" in log and "[worker-0] the program saved its model" in log, \
        log[-3000:]
    assert "train_program: copied the model from minio://" in log, log[-3000:]
    _blessed_and_exported(node_bed, run_id, 0.8, "serving-program/")


def test_the_images_pipeline_on_kfp_trains_png_digits_as_a_tfjob(node_bed, kfp_host,
                                                                on_the_store, tmp_path):
    """The PNG digits (TFRecord of encoded images) on KFP's store; the images pipeline's
    training as a TFJob; its artifacts in MLMD: the dataset, the model, the metrics, the
    confusion matrix and both HTML reports."""
    from kfdist.sample_data import write_images_sample

    write_images_sample(str(tmp_path / "digits"))
    store = _object_store(node_bed)
    for path in sorted((tmp_path / "digits").iterdir()):
        store.upload_file(str(path), "mlpipeline", f"data/png-digits/{path.name}")
    submitted = _submit(kfp_host, REPO / "pipelines" / "images.yaml", "--wait",
                        "--param", "source_uri=minio://mlpipeline/data/png-digits",
                        "--param", "export_base=minio://mlpipeline/serving-images",
                        "--param", "backend=tfjob", "--param", "epochs=5")
    out, err = submitted.communicate(timeout=RUN_TIMEOUT_S)
    assert submitted.returncode == 0, err
    run_id = json.loads(out.splitlines()[-1])["run_id"]
    _job_done(node_bed, "tfjob", run_id)
    kinds = [a["type"] for a in _lineage(node_bed, run_id)["artifacts"]]
    assert {"system.Dataset", "system.Model", "system.ClassificationMetrics"} <= set(kinds)
    assert kinds.count("system.HTML") == 2, kinds  # the data report and the evaluation's
    _blessed_and_exported(node_bed, run_id, 0.9, "serving-images/")


def _step_log(node_bed, run_id: str, task: str) -> str:
    """The log of the run's pod that executed `task` (its `main` container: the component)."""
    [pod] = step_pods(node_bed, run_id, task)
    return step_log(node_bed, pod)


#: How long a terminated run's TFJob and replicas may take to go: the step deletes the job within
#: the second Argo gives it, each replica then has its 30 s grace period.
TERMINATED_GONE_S = 60


def test_a_run_terminated_through_the_api_deletes_its_tfjob_and_replicas(
        node_bed, client, kfp_host, on_the_store):
    waiting = _submit(kfp_host, REPO / "pipelines" / "mnist.yaml", "--wait",
                      "--param", f"source_uri={on_the_store}",
                      "--param", "export_base=minio://mlpipeline/serving-terminated",
                      "--param", "backend=tfjob", "--param", "epochs=200")
    job = wait_for(lambda: next((j for j in _objects(node_bed, "tfjob", RUN_ID_LABEL)
                                 if _training(node_bed, j)), None),
                   RUN_TIMEOUT_S, "a TFJob whose replicas run", every=2.0)
    run_id = job["metadata"]["labels"][RUN_ID_LABEL]
    client.terminate_run(run_id)
    out, err = waiting.communicate(timeout=RUN_TIMEOUT_S)
    assert waiting.returncode == 1 and f"run {run_id} was terminated" in err, err
    # Argo stops the step (SIGTERM; it keeps the stopped pod, which owns the job): the step
    # deletes its TFJob (though KFP's launcher, which reads its log, died of the same signal:
    # test_step_stopped_with_its_reader.py), and the operator's replicas go with it.
    name = job["metadata"]["name"]

    def left() -> list:
        jobs = [j["metadata"]["name"] for j in _objects(node_bed, "tfjob",
                                                         f"{RUN_ID_LABEL}={run_id}")]
        return jobs + [f"{p['metadata']['name']} ({p['status'].get('phase')}"
                       f"{', deleting' if p['metadata'].get('deletionTimestamp') else ''})"
                       for p in job_pods(node_bed, job)]

    try:
        wait_for(lambda: not left(), TERMINATED_GONE_S, "", every=2.0)
    except AssertionError:
        raise AssertionError(f"TFJob {name} and its replicas not gone within "
                             f"{TERMINATED_GONE_S} s of the run's end: {left()}") from None


def _training(node_bed, job: dict) -> bool:
    """Whether every replica pod of `job` is Running."""
    pods = job_pods(node_bed, job, "worker")
    return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)
