"""What a program's failure means, said in one line when kfdist knows it.

A program's replica that fails shows its last lines; some failures have a cause that those
lines do not say:
- Keras 3, TensorFlow's `tf.keras` since 2.16, fails `model.fit` under MultiWorkerMirroredStrategy
  with `Attempt to convert a value (PerReplica ...)`: the fix is tf-keras (Keras 2) selected with
  `TF_USE_LEGACY_KERAS=1`. A custom loop that uses a per-replica value as a tensor (without
  `strategy.reduce`) raises the same error, from its own code rather than Keras'.
- `No module named 'kfdist'`: the replica's image (or Python) lacks kfdist, which kfdist's entry
  (`--program-dir`, `--stage`, a TensorFlow TrainJob) and `kfdist.program` need.
Both `kfdist launch` and the `train_program` step add that line to the failure, each in the words
of its own flags or parameters (`Wording`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, Optional

from kfdist import images
from kfdist.components.common.errors import TrainingFailedError

#: What a per-replica value used as a tensor raises (Keras 3's `model.fit` under a multi-worker
#: strategy, or a custom loop that forgets `strategy.reduce`).
PER_REPLICA_SIGNATURE = "Attempt to convert a value (PerReplica"
#: A frame of Keras 3's own code in a traceback (tf-keras' is `tf_keras/src/`).
KERAS3_FRAME = "/keras/src/"
#: What a replica whose Python has no kfdist raises.
NO_KFDIST_SIGNATURE = "No module named 'kfdist'"


@dataclasses.dataclass(frozen=True)
class Wording:
    """How the person who runs the job changes what a hint asks to change.

    Attributes:
      env: How to set a variable in every replica (None: the caller has no way; the program
        sets it).
      image: How to give the replicas' image (None: the replicas run on this machine).
      default_image: What the replicas run without `image` (None: an image must be given).
    """

    env: Optional[str] = None
    image: Optional[str] = None
    default_image: Optional[str] = None


#: `kfdist launch --backend local`, and on a cluster.
LAUNCH_LOCAL = Wording(env="kfdist launch --env TF_USE_LEGACY_KERAS=1")
LAUNCH_CLUSTER = dataclasses.replace(
    LAUNCH_LOCAL, image="--image",
    default_image="leave --image out and ship the program with --program-dir, which runs it in "
                  "kfdist's runtime image")
#: The `train_program` step (`kfdist run program`), here and on a cluster.
STEP_LOCAL = Wording()
STEP_CLUSTER = Wording(image="the step's image parameter (kfdist run program's --image)",
                       default_image="leave it unset for kfdist's runtime image")


def keras3_hint(wording: Wording) -> str:
    """The line that says a failure is Keras 3's `model.fit` under a multi-worker strategy."""
    where = ", or with " + wording.env if wording.env else ""
    return ("the program failed in Keras 3 (tf.keras since TensorFlow 2.16), whose model.fit does "
            "not run under MultiWorkerMirroredStrategy (the 'PerReplica' error above): install "
            "tf-keras in the program's image or environment and set TF_USE_LEGACY_KERAS=1 before "
            "TensorFlow is imported: in the program (os.environ.setdefault(\"TF_USE_LEGACY_KERAS\""
            f", \"1\")){where}")


def per_replica_hint(wording: Wording) -> str:
    """The line that says a per-replica value was used as a tensor, outside Keras 3's frames."""
    where = ", or with " + wording.env if wording.env else ""
    return ("a per-replica value was used as a tensor (the 'PerReplica' error above): in a custom "
            "training loop, reduce it with strategy.reduce (or take its parts with "
            "strategy.experimental_local_results) first; under Keras 3's model.fit, install "
            f"tf-keras and set TF_USE_LEGACY_KERAS=1 (in the program{where})")


def no_kfdist_hint(wording: Wording) -> str:
    """The line that says a replica found no kfdist, and where it must be installed."""
    if wording.image is None:
        return (f"a replica's Python has no kfdist (\"{NO_KFDIST_SIGNATURE}\"), which its "
                "`from kfdist import program` needs: run the program with the Python kfdist is "
                "installed in")
    fallback = f", or {wording.default_image}" if wording.default_image else ""
    return (f"the replicas' image has no kfdist (\"{NO_KFDIST_SIGNATURE}\"), which kfdist's entry "
            "(--program-dir, --stage, a TensorFlow TrainJob) and kfdist.program run in: give "
            f"{wording.image} an image built FROM {images.image('runtime')}{fallback}")


def hint_for(message: str, wording: Wording = STEP_LOCAL) -> Optional[str]:
    """The line that explains a failure with this message, or None when kfdist knows none.

    Args:
      message: The failure, with its replicas' last lines.
      wording: How the caller's user changes the environment and the image.
    """
    if PER_REPLICA_SIGNATURE in message:
        return keras3_hint(wording) if KERAS3_FRAME in message else per_replica_hint(wording)
    if NO_KFDIST_SIGNATURE in message:
        return no_kfdist_hint(wording)
    return None


@contextlib.contextmanager
def explained(wording: Wording = STEP_LOCAL) -> Iterator[None]:
    """Adds `hint_for`'s line, as the last, to a `TrainingFailedError` raised inside, which keeps
    its type (a `JobTimeoutError` stays one)."""
    try:
        yield
    except TrainingFailedError as error:
        hint = hint_for(str(error), wording)
        if hint is None or hint in str(error):
            raise
        raise type(error)(f"{error}\n{hint}") from error
