"""How a replica trains: strategy, input, model, `fit`, then its outputs.

The replica finds its role in TF_CONFIG (none: a lone replica), creates the
distribution strategy first, builds the input pipeline and the model under the
strategy, and trains with tf-keras `fit`. After every epoch the leader scores
a plain copy of the model on the eval split (`epoch_validation`).

Outputs: the chief writes the Model artifact's `saved_model/`, `serving_model/`,
`dataset_metadata.json`, `history.json` and `checkpoints/` into model_dir and
a run summary into the job's work_dir; every replica writes its
`ReplicaReport` into the work_dir. Non-chief replicas take part in every save
(they hold collective ops) but save into their scratch directory, deleted
afterwards.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from typing import Optional

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import numpy as np
import tensorflow as tf

from kfdist.components.common import dataset_spec, eval_predictions, model_artifact
from kfdist.components.train_distributed.job import config, tf_config
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.job import work_files
from kfdist.components.train_distributed.replica import callbacks as replica_callbacks
from kfdist.components.train_distributed.replica import epoch_validation, input_pipeline, input_wait, models
from kfdist.components.train_distributed.replica import early_stopping, validation_input
from kfdist.components.train_distributed.replica.outputs import (ReplicaOutcome, log, save_model, weights_sha256,
                                 write_chief_outputs, write_json)
from kfdist.components.train_distributed.replica.strategies import Role, make_role, serve_forever, wait_for_all_workers


def _input(job: config.JobConfig, role: Role, meta, meter) -> object:
    training = job.training
    input_fn = input_pipeline.make_input_fn(
        meta, job.dataset_dir, batch_size_per_replica=training.batch_size_per_replica,
        seed=training.seed, sharding=training.input_sharding, log=log if role.leader else None,
        wait_meter=meter, per_worker_order=training.strategy == strategy_rules.PARAMETER_SERVER,
        validation_fraction=(training.validation_fraction if training.holds_out_validation
                             else None))
    if role.hvd is not None:
        return input_fn(tf.distribute.InputContext(role.replicas, role.hvd.rank(), role.replicas))
    if training.strategy == strategy_rules.PARAMETER_SERVER:
        return tf.keras.utils.experimental.DatasetCreator(input_fn)
    return role.strategy.distribute_datasets_from_function(input_fn)


def train_replica(job: config.JobConfig) -> Optional[ReplicaOutcome]:
    """Plays this replica's part in the job and writes its outputs.

    Parameter servers and `parameter_server` workers serve until the job
    ends them; the evaluator evaluates checkpoints until then; every other
    replica trains with `fit`.

    Returns:
      The outcome of a training replica; None for a server or the evaluator.
    """
    training = job.training
    tf.keras.utils.set_random_seed(training.seed)
    cluster_config = tf_config.parse_env(os.environ)
    task = tf_config.current_task(cluster_config)
    if task.type == tf_config.EVALUATOR:
        from kfdist.components.train_distributed.replica import sidecar_evaluator

        sidecar_evaluator.run(job, log)
        return None
    if training.strategy == strategy_rules.PARAMETER_SERVER and task.type in (tf_config.WORKER, tf_config.PS):
        serve_forever(cluster_config, task)
        return None
    role = make_role(training, cluster_config)
    cluster = ("none (no TF_CONFIG)" if cluster_config is None else
               ", ".join(f"{len(a)} {t}" for t, a in cluster_config["cluster"].items()))
    if role.hvd is not None:
        cluster = f"{role.replicas} MPI rank(s)"
    log(f"replica {role.task.name} pid={os.getpid()} leader={role.leader} cluster: {cluster}; "
        f"strategy={training.strategy} replicas_in_sync={role.replicas}")
    return _fit_and_report(job, role)


def _build_model(job: config.JobConfig, role: Role, meta) -> "tuple[tf.keras.Model, float]":
    """The compiled model under the strategy, and its learning rate."""
    training = job.training
    learning_rate = training.learning_rate
    with role.strategy.scope():
        model = models.build_model(training.model_name, meta)
        if role.hvd is not None:
            learning_rate *= role.replicas  # the global batch is `replicas` times larger
        models.compile_model(model, learning_rate,
                             wrap_optimizer=role.hvd.DistributedOptimizer if role.hvd else None,
                             steps_per_execution=training.steps_per_execution,
                             regression=meta.is_regression)
        if role.hvd is not None:
            # Horovod's broadcast pairs variables across ranks by name. Built lazily (tf-keras
            # 2.21), the optimizer's slots are named `Adam/m/...` on rank 0, which also runs
            # BackupAndRestore, and `m/...` on the others: the first broadcast waits forever.
            model.optimizer.build(model.trainable_variables)
    return model, learning_rate


def _fit_and_report(job: config.JobConfig, role: Role) -> ReplicaOutcome:
    training = job.training
    meta = dataset_spec.load_metadata(job.dataset_dir)
    global_batch = training.batch_size_per_replica * role.replicas
    fraction = training.validation_fraction if training.holds_out_validation else None
    steps = input_pipeline.steps_per_epoch(meta, global_batch, validation_fraction=fraction)
    meter = None if training.strategy == strategy_rules.PARAMETER_SERVER else input_wait.InputWaitMeter()
    dataset = _input(job, role, meta, meter)
    model, learning_rate = _build_model(job, role, meta)
    # The leader's plain copy of the model for the per-epoch validation, outside the strategy.
    validation = epoch_validation.for_replica(role.leader, training.model_name, meta,
                                              job.dataset_dir, fraction)
    callbacks, history_writer, backup_dir, keeper = replica_callbacks.make_callbacks(
        job, role, meter, steps, global_batch, validation)
    initial_epoch = replica_callbacks.resume_epoch(role, backup_dir) if role.hvd is not None else 0
    log_lr = f", learning rate {learning_rate:g}" if learning_rate != training.learning_rate else ""
    if role.leader:
        log(f"training {training.model_name}: {training.epochs} epoch(s) x {steps} steps, "
            f"global batch {global_batch}{log_lr}")
        if fraction is not None:
            log(f"early stopping: patience {training.early_stopping_patience} epoch(s), "
                f"min_delta {training.early_stopping_min_delta:g}, on a "
                f"validation part of {validation_input.validation_examples(meta, fraction):,} "
                f"train examples ({fraction:g} of the train split, not trained on)")
    start = time.perf_counter()
    # The epochs a restored backup holds when nothing is left to train.
    done = training.epochs
    try:
        ran = model.fit(dataset, epochs=training.epochs, steps_per_epoch=steps, verbose=0,
                        initial_epoch=initial_epoch, callbacks=callbacks).epoch
    except early_stopping.AlreadyStopped as stopped:  # restarted after it had stopped early
        log(f"{stopped}: nothing left to train")
        ran, done = [], stopped.epochs_done
    wall = time.perf_counter() - start
    initial_epoch = ran[0] if ran else done
    epochs_run = len(ran)
    if keeper is not None:
        keeper.restore_best(model)
    # Training is complete: nothing is left to resume. The other workers remove their own
    # backup scratch (`workertemp_N`) as their last epoch ends; the leader removes the rest
    # only once every worker is past that point.
    wait_for_all_workers(role, training)
    if role.leader:
        shutil.rmtree(backup_dir, ignore_errors=True)
    save_model(model, job, role, meta)
    if role.leader:
        _keep_eval_predictions(job, meta)
        if job.job.evaluator:
            from kfdist.components.train_distributed.replica import sidecar_evaluator

            last_epoch = max((e["epoch"] for e in history_writer.epochs), default=0)
            sidecar_evaluator.wait_for_final_evaluation(job, last_epoch, log)
            shutil.rmtree(os.path.join(job.model_dir, model_artifact.CHECKPOINTS_DIR,
                                       model_artifact.PENDING_CHECKPOINTS_DIR), ignore_errors=True)
        write_chief_outputs(job, history_writer.epochs,
                            steps * global_batch * epochs_run / wall if epochs_run else 0.0, wall,
                            meter.fraction if meter is not None else None, initial_epoch,
                            keeper.best_epoch if keeper is not None else None)
    return _write_report(job, role, model)


def _keep_eval_predictions(job: config.JobConfig, meta) -> None:
    """Scores the saved SavedModel on the eval split into the artifact (`eval_predictions`).

    Best effort: the predictions only spare `evaluate_model` a prediction of its own, so a
    failure here (a model that does not load back, say) is logged and leaves evaluate_model
    to predict, and to report the failure, itself.
    """
    started = time.perf_counter()
    try:
        accuracy = eval_predictions.record(job.model_dir, job.dataset_dir, meta)
    except Exception as error:  # noqa: BLE001  (any failure leaves the evaluation to its step)
        log(f"did not keep eval-split predictions for evaluate_model: {error!r}")
        return
    if accuracy is not None:
        log(f"scored the SavedModel on the eval split: "
            f"{'RMSE' if meta.is_regression else 'accuracy'} {accuracy:.4f} "
            f"({time.perf_counter() - started:.1f}s), kept for evaluate_model")


def _write_report(job: config.JobConfig, role: Role, model: tf.keras.Model) -> ReplicaOutcome:
    weights = model.get_weights()
    report = model_artifact.ReplicaReport(
        task=role.task.name, pid=os.getpid(), num_replicas_in_sync=role.replicas,
        weights_sha256=weights_sha256(weights),
        variable_devices=[str(v.device) for v in model.trainable_variables])
    if job.dump_weights:
        np.savez(work_files.weights_dump_path(job.work_dir, role.task.label),
                 *[np.asarray(w) for w in weights])
    write_json(work_files.replica_report_path(job.work_dir, role.task.label), dataclasses.asdict(report))
    log(f"replica {role.task.name} done: weights sha256 {report.weights_sha256[:16]}...")
    return ReplicaOutcome(report, role.leader)
