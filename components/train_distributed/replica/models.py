"""The model registry: built-in models and user models named `package.module:function`.

Every model takes the *preprocessed* float32 input of shape
`meta.feature.shape` (see `tf_features.preprocess_fn`) and ends in a softmax
over `meta.num_classes` classes. A user model is a function::

    def my_model(input_shape: tuple, num_classes: int) -> tf.keras.Model: ...

returning a tf-keras (legacy Keras) model; it is imported in every replica.

Name resolution and compatibility checks need no TensorFlow, so the launcher
and the CLI can run them before anything starts (a user module is imported,
though, and may import TensorFlow itself).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Tuple

import kfdist  # noqa: F401  (selects legacy Keras before TensorFlow loads)
from kfdist.components.common.dataset_spec import IMAGE_KEY, DatasetMetadata
from kfdist.components.common.errors import InvalidInputError

#: `function(input_shape, num_classes) -> tf.keras.Model`.
ModelBuilder = Callable[[Tuple[int, ...], int], Any]

MNIST_SHAPE = (28, 28)


def build_mnist_mlp(input_shape: Tuple[int, ...], num_classes: int):
    """Flatten → Dense(512, relu) → Dropout(0.2) → Dense(num_classes, softmax)."""
    import tensorflow as tf  # lazily: validation must not need TensorFlow

    return tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=tuple(input_shape)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(num_classes, activation="softmax"),
    ], name="mnist_mlp")


def build_mnist_cnn(input_shape: Tuple[int, ...], num_classes: int):
    """A small conv net: two Conv/MaxPool blocks, Dropout, softmax Dense."""
    import tensorflow as tf  # lazily: validation must not need TensorFlow

    height, width = input_shape
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((height, width, 1), input_shape=tuple(input_shape)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(num_classes, activation="softmax"),
    ], name="mnist_cnn")


#: Built-in models by name. All of them need a 28×28 `image` feature.
BUILTIN_MODELS: Dict[str, ModelBuilder] = {
    "mnist_mlp": build_mnist_mlp,
    "mnist_cnn": build_mnist_cnn,
}


def _valid_names_hint() -> str:
    return f"valid models: {sorted(BUILTIN_MODELS)} or a user model 'package.module:function'"


def resolve_model(name: str) -> ModelBuilder:
    """Returns the builder for a built-in name or a `package.module:function`.

    Raises:
      InvalidInputError: For an unknown name, a module that fails to import
        (with the import error), or a module without that callable.
    """
    if name in BUILTIN_MODELS:
        return BUILTIN_MODELS[name]
    if ":" not in name:
        raise InvalidInputError(f"unknown model {name!r}; {_valid_names_hint()}")
    module_name, _, function_name = name.partition(":")
    if not module_name or not function_name.isidentifier():
        raise InvalidInputError(
            f"model {name!r} is not of the form 'package.module:function'; {_valid_names_hint()}")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # ImportError, or anything the module raises while importing
        raise InvalidInputError(
            f"user model {name!r}: module {module_name!r} does not import: "
            f"{type(e).__name__}: {e}") from e
    builder = getattr(module, function_name, None)
    if not callable(builder):
        raise InvalidInputError(
            f"user model {name!r}: module {module_name!r} has no function {function_name!r}")
    return builder


def check_compatible(name: str, meta: DatasetMetadata) -> None:
    """Checks that a built-in model can read the dataset's feature.

    User models are checked only when built, in the replicas.

    Raises:
      InvalidInputError: If an `mnist_*` model meets anything but a 28×28 image.
    """
    if name in BUILTIN_MODELS and (meta.feature.key != IMAGE_KEY
                                   or tuple(meta.feature.shape) != MNIST_SHAPE):
        raise InvalidInputError(
            f"model {name!r} needs a {MNIST_SHAPE[0]}x{MNIST_SHAPE[1]} {IMAGE_KEY!r} feature, "
            f"but the dataset has {meta.feature.key!r} of shape {list(meta.feature.shape)}; "
            "use a user model 'package.module:function' for other inputs")


def build_model(name: str, meta: DatasetMetadata):
    """Builds (uncompiled) the model `name` for the dataset; call inside `strategy.scope()`.

    Raises:
      InvalidInputError: If the name does not resolve, the model does not fit
        the dataset, or a user function returns something that is not a
        tf-keras `Model`.
    """
    import tensorflow as tf

    check_compatible(name, meta)
    model = resolve_model(name)(tuple(meta.feature.shape), int(meta.num_classes))
    if not isinstance(model, tf.keras.Model):
        raise InvalidInputError(
            f"model {name!r} returned {type(model).__module__}.{type(model).__name__}, "
            "not a tf-keras Model (build it with tf.keras / tf_keras, not Keras 3)")
    return model


def compile_model(model, learning_rate: float, wrap_optimizer=None) -> None:
    """Compiles with Adam, sparse categorical cross-entropy and accuracy.

    Args:
      model: The tf-keras model.
      learning_rate: Adam's learning rate.
      wrap_optimizer: Wraps the optimizer, e.g. Horovod's `DistributedOptimizer`.
    """
    import tensorflow as tf

    optimizer = tf.keras.optimizers.Adam(learning_rate=learning_rate)
    model.compile(optimizer=wrap_optimizer(optimizer) if wrap_optimizer else optimizer,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                  metrics=["accuracy"])
