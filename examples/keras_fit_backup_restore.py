"""A Keras `fit` program that survives restarts with BackupAndRestore in KFDIST_CHECKPOINT_DIR.

A worker that is killed mid-epoch is restarted by the operator (restartPolicy
ExitCode) and `fit` resumes from the last backup, shared by every replica.
The workers that lose that peer mid-collective exit with 138, a code
ExitCode treats as retryable, so the whole cluster re-forms and resumes.
The chief saves the trained model as a SavedModel into `KFDIST_MODEL_DIR`.
"""

import argparse
import json
import os
import sys
import tempfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf  # noqa: E402


def _is_chief() -> bool:
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return task.get("type", "worker") in ("chief", "worker") and task.get("index", 0) == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    args = parser.parse_args()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    xs = tf.random.stateless_uniform([2048, 1], seed=[1, 2], minval=-1, maxval=1)
    data = tf.data.Dataset.from_tensor_slices((xs, 3 * xs + 2)).repeat().batch(64)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    backup = tf.keras.callbacks.BackupAndRestore(
        os.path.join(os.environ["KFDIST_CHECKPOINT_DIR"], "backup"))
    model.fit(data, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
              callbacks=[backup], verbose=2)
    target = os.environ["KFDIST_MODEL_DIR"] if _is_chief() else tempfile.mkdtemp()
    model.save(target)
    print(f"saved SavedModel to {target}", flush=True)


#: Errors a worker gets when a peer died or restarted mid-collective.
PEER_LOST_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                    tf.errors.DeadlineExceededError)
#: A retryable exit code (128-255) under the ExitCode restart policy.
PEER_LOST_EXIT_CODE = 138


if __name__ == "__main__":
    try:
        main()
    except PEER_LOST_ERRORS as lost:
        print(f"lost a peer ({type(lost).__name__}); exiting with {PEER_LOST_EXIT_CODE} "
              "to be restarted", flush=True)
        sys.exit(PEER_LOST_EXIT_CODE)
