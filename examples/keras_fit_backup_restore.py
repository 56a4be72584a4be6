"""A Keras `fit` program that survives restarts with BackupAndRestore in KFDIST_CHECKPOINT_DIR.

It classifies the kfdist dataset in `KFDIST_DATA_DIR` (read with
`kfdist.program`, the same input the pipeline's evaluate and export steps
feed the model) with MultiWorkerMirroredStrategy. A worker that is killed
mid-epoch is restarted by the operator (restartPolicy ExitCode) and `fit`
resumes from the last backup, shared by every replica. The workers that lose
that peer mid-collective exit with 138, a code ExitCode treats as retryable,
so the whole cluster re-forms and resumes. The leader saves the trained
model as a SavedModel into `KFDIST_MODEL_DIR`, where the pipeline's
`train_program` step hands it to evaluate and export.
"""

import argparse
import os
import sys
import tempfile

# tf-keras, which MultiWorkerMirrored's `fit` and a SavedModel from `model.save(dir)` need: this
# program's own choice, made before TensorFlow loads (kfdist sets nothing for it).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from kfdist import program  # noqa: E402
import tensorflow as tf  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    data = program.dataset("train", batch_size=args.batch_size).repeat()
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input(shape=program.input_shape()),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(program.num_classes(), activation="softmax")])
        model.compile(optimizer=tf.keras.optimizers.Adam(0.003),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    backup = tf.keras.callbacks.BackupAndRestore(os.path.join(program.checkpoint_dir(), "backup"))
    model.fit(data, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
              callbacks=[backup], verbose=2)
    target = program.model_dir() if program.is_leader() else tempfile.mkdtemp()
    model.save(target)  # every replica saves (a collective); only the leader's copy is kept
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
