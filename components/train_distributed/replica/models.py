"""The model registry: built-in models and user models named `package.module:function`.

Every model takes the *preprocessed* float32 input of shape
`dataset_spec.model_input_shape(meta)` (see `tf_features.preprocess_fn`) and ends in a softmax
over `meta.num_classes` classes, or for a regression in one linear unit mapped to the label's
units (`regression_head`). A user model is a function::

    def my_model(input_shape: tuple, num_classes: int) -> tf.keras.Model: ...

returning a tf-keras (legacy Keras) model; it is imported in every replica. For a
regression it is given `num_classes=1` and ends in one linear unit.

Name resolution and compatibility checks need no TensorFlow, so the launcher
and the CLI can run them before anything starts (a user module is imported,
though, and may import TensorFlow itself).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Tuple

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common.dataset_spec import (
    FEATURES_KEY, IMAGE_KEY, DatasetMetadata, model_input_shape)
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.train_distributed.replica import regression_head

#: `function(input_shape, num_classes) -> tf.keras.Model`.
ModelBuilder = Callable[[Tuple[int, ...], int], Any]

MNIST_SHAPE = (28, 28)
#: `image_cnn` adds conv blocks while the feature map is at least this wide and high.
MIN_CONV_SIZE = 6
#: `image_cnn` flattens feature maps of at most this many positions, else averages them.
MAX_FLATTEN_POSITIONS = 16


def build_mnist_mlp(input_shape: Tuple[int, ...], num_classes: int,
                    activation: str = "softmax"):
    """Flatten → Dense(512, relu) → Dropout(0.2) → Dense(num_classes, softmax)."""
    import tensorflow as tf  # lazily: validation must not need TensorFlow

    return tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=tuple(input_shape)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(num_classes, activation=activation),
    ], name="mnist_mlp")


def build_mnist_cnn(input_shape: Tuple[int, ...], num_classes: int,
                    activation: str = "softmax"):
    """A small conv net for (28, 28) or (28, 28, 1): two Conv/MaxPool blocks, Dropout, softmax."""
    import tensorflow as tf  # lazily: validation must not need TensorFlow

    height, width = input_shape[:2]
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((height, width, 1), input_shape=tuple(input_shape)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(num_classes, activation=activation),
    ], name="mnist_cnn")


def build_image_cnn(input_shape: Tuple[int, ...], num_classes: int,
                    activation: str = "softmax"):
    """A conv net sized to its input image, (H, W) (one channel) or (H, W, C).

    Conv2D(3x3, relu, same padding) + MaxPooling2D blocks of 32, 64, 128
    filters, added while the feature map is at least `MIN_CONV_SIZE` wide and
    high (at most three); then Flatten, or GlobalAveragePooling2D for maps of
    more than `MAX_FLATTEN_POSITIONS` positions; Dropout(0.3); softmax Dense.
    """
    import tensorflow as tf  # lazily: validation must not need TensorFlow

    height, width = int(input_shape[0]), int(input_shape[1])
    channels = int(input_shape[2]) if len(input_shape) == 3 else 1
    layers = [tf.keras.layers.Reshape((height, width, channels), input_shape=tuple(input_shape))]
    for filters in (32, 64, 128):
        if min(height, width) < MIN_CONV_SIZE:
            break
        layers += [tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu"),
                   tf.keras.layers.MaxPooling2D()]
        height, width = height // 2, width // 2
    layers += [tf.keras.layers.Flatten() if height * width <= MAX_FLATTEN_POSITIONS
               else tf.keras.layers.GlobalAveragePooling2D(),
               tf.keras.layers.Dropout(0.3),
               tf.keras.layers.Dense(num_classes, activation=activation)]
    return tf.keras.Sequential(layers, name="image_cnn")


def build_tabular_mlp(input_shape: Tuple[int, ...], num_classes: int,
                      activation: str = "softmax"):
    """For preprocessed table rows `(n,)`: Dense(64) → Dropout(0.1) → Dense(32) → softmax
    (`activation`; `linear` with one unit for a regression)."""
    import tensorflow as tf  # lazily: validation must not need TensorFlow

    return tf.keras.Sequential([
        tf.keras.layers.Dense(64, activation="relu", input_shape=tuple(input_shape)),
        tf.keras.layers.Dropout(0.1),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(num_classes, activation=activation),
    ], name="tabular_mlp")


#: Built-in models by name: `mnist_*` need a 28×28 `image` feature, `image_cnn` any image,
#: `tabular_mlp` a table's `features`.
BUILTIN_MODELS: Dict[str, ModelBuilder] = {
    "mnist_mlp": build_mnist_mlp,
    "mnist_cnn": build_mnist_cnn,
    "image_cnn": build_image_cnn,
    "tabular_mlp": build_tabular_mlp,
}


def default_model_name(meta: DatasetMetadata) -> str:
    """The built-in model for a dataset when none is named: `mnist_mlp` for MNIST's raw
    28×28 images, `image_cnn` for other images (encoded, or with channels), `tabular_mlp`
    for tables."""
    if meta.feature.key == IMAGE_KEY:
        return "mnist_mlp" if tuple(meta.feature.shape) == MNIST_SHAPE else "image_cnn"
    return "tabular_mlp"


def model_for(name: str, meta: DatasetMetadata) -> str:
    """`name`, or the dataset's default model when `name` is empty."""
    return name or default_model_name(meta)


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
      InvalidInputError: If an `mnist_*` model meets anything but a 28×28
        one-channel image, or `image_cnn` anything but an image.
    """
    name = model_for(name, meta)
    key, shape = meta.feature.key, tuple(meta.feature.shape)
    user_hint = "use a user model 'package.module:function' for other inputs"
    if name in ("mnist_mlp", "mnist_cnn"):
        fits = key == IMAGE_KEY and shape in (MNIST_SHAPE, MNIST_SHAPE + (1,))
        need = f"a {MNIST_SHAPE[0]}x{MNIST_SHAPE[1]} {IMAGE_KEY!r} feature (1 channel)"
        hint = ("use model 'image_cnn', which sizes itself to any image, or a user model "
                "'package.module:function'" if key == IMAGE_KEY and len(shape) in (2, 3)
                else user_hint)
    elif name == "image_cnn":
        fits = key == IMAGE_KEY and len(shape) in (2, 3)
        need, hint = f"an {IMAGE_KEY!r} feature of shape [H, W] or [H, W, C]", user_hint
    elif name == "tabular_mlp":
        fits = key == FEATURES_KEY
        need, hint = f"a table ({FEATURES_KEY!r} feature)", "use 'image_cnn' for images"
    else:
        return
    require(fits, f"model {name!r} needs {need}, but the dataset has {key!r} of shape "
                  f"{list(shape)}; {hint}")


def build_model(name: str, meta: DatasetMetadata):
    """Builds (uncompiled) the model `name` for the dataset; call inside `strategy.scope()`.

    Raises:
      InvalidInputError: If the name does not resolve, the model does not fit
        the dataset, or a user function returns something that is not a
        tf-keras `Model`.
    """
    import tensorflow as tf

    check_compatible(name, meta)
    name = model_for(name, meta)
    builder = resolve_model(name)
    if not meta.is_regression:
        model = builder(model_input_shape(meta), int(meta.num_classes))
    elif name in BUILTIN_MODELS:
        model = builder(model_input_shape(meta), 1, activation="linear")
    else:
        model = builder(model_input_shape(meta), 1)
    if not isinstance(model, tf.keras.Model):
        raise InvalidInputError(
            f"model {name!r} returned {type(model).__module__}.{type(model).__name__}, "
            "not a tf-keras Model (build it with tf.keras / tf_keras, not Keras 3)")
    return regression_head.in_label_units(model, meta) if meta.is_regression else model


def compile_model(model, learning_rate: float, wrap_optimizer=None,
                  steps_per_execution: int = 1, regression: bool = False) -> None:
    """Compiles with Adam, sparse categorical cross-entropy and accuracy (a regression: the
    MSE, RMSE and MAE, `regression_head.compile_args`).

    Args:
      model: The tf-keras model.
      learning_rate: Adam's learning rate.
      wrap_optimizer: Wraps the optimizer, e.g. Horovod's `DistributedOptimizer`.
      steps_per_execution: Training steps per call of the compiled train function.
      regression: Whether the label is a number (`DatasetMetadata.is_regression`).
    """
    import tensorflow as tf

    optimizer = tf.keras.optimizers.Adam(learning_rate=learning_rate)
    loss = (regression_head.compile_args() if regression else
            {"loss": tf.keras.losses.SparseCategoricalCrossentropy(), "metrics": ["accuracy"]})
    model.compile(optimizer=wrap_optimizer(optimizer) if wrap_optimizer else optimizer,
                  steps_per_execution=steps_per_execution, **loss)
