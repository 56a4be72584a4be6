"""Horovod for tf-keras (legacy Keras), imported so that it really averages gradients.

Horovod 0.28.1's `horovod.tensorflow.keras` takes its Keras backend from a
bare `import keras`. With TensorFlow 2.16+ that is Keras 3, whose backend
lacks what Horovod's callbacks call (`MetricAverageCallback` fails), and a
Keras 3 model wrapped in `DistributedOptimizer` trains without averaging its
gradients and without any error. kfdist trains tf-keras models, so the
import below lets Horovod see tf-keras as `keras` while its modules load,
then puts the real `keras` module back.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)

_hvd = None


@contextlib.contextmanager
def _keras_is_tf_keras() -> Iterator[None]:
    import tf_keras

    saved = {name: sys.modules.get(name) for name in ("keras", "keras.backend")}
    sys.modules["keras"] = tf_keras
    sys.modules["keras.backend"] = tf_keras.backend
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def horovod_keras():
    """Returns `horovod.tensorflow.keras`, bound to tf-keras; imports it on first use.

    Raises:
      RuntimeError: If Horovod is not installed (with how to install it).
    """
    global _hvd
    if _hvd is not None:
        return _hvd
    if "horovod.tensorflow.keras" in sys.modules:
        raise RuntimeError("horovod.tensorflow.keras was imported before kfdist could bind it to "
                           "tf-keras; import it through horovod_support.horovod_keras()")
    try:
        with _keras_is_tf_keras():
            import horovod.tensorflow.keras as hvd
            import horovod.tensorflow.keras.callbacks  # noqa: F401
    except ImportError as e:
        raise RuntimeError(
            "strategy horovod needs Horovod 0.28.1 built against this TensorFlow with MPI: "
            "run containers/horovod/install-horovod.sh from the kfdist repository (it patches "
            "Horovod's sdist for TensorFlow 2.18+ and builds it; it needs openmpi-bin "
            f"libopenmpi-dev cmake g++) ({e})") from e
    _hvd = hvd
    return hvd

