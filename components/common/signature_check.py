"""Does a SavedModel's serving signature fit a dataset? One line saying why not.

A model trained on other data (a program that ignored `KFDIST_DATA_DIR`, a
served model from before the dataset changed) would otherwise be found only
when it is first fed, as a TensorFlow traceback. The training steps check
the model they wrote when training ends; the evaluate step can check a served
model the same way.

Two kinds of SavedModel are checked:

* a trained model (`model_artifact.SAVED_MODEL_DIR`, `served=False`): one
  floating-point input taking the *preprocessed* example,
  `[batch, *dataset_spec.model_input_shape(meta)]`;
* a serving model (`model_artifact.SERVING_MODEL_DIR` or an export,
  `served=True`): the raw inputs `serving_inputs.serving_inputs(meta)` names,
  each with its dtype and shape.

Only the signature recorded in `saved_model.pb` is read (no function is
loaded or traced), so the check takes well under a second.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence, Tuple

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common.serving_inputs import SIGNATURE_NAME, serving_inputs

#: One signature input as read from `saved_model.pb`: dtype name and shape (None: any size;
#: the shape itself None: any rank).
InputSpec = Tuple[str, Optional[Tuple[Optional[int], ...]]]
#: dtypes a trained model's input may have: the preprocessed examples are float32.
_FLOATING = ("float16", "bfloat16", "float32", "float64")


def signature_inputs(saved_model_dir: str,
                     signature: str = SIGNATURE_NAME) -> Optional[Dict[str, InputSpec]]:
    """The inputs of a SavedModel's signature, by name, as `saved_model.pb` records them.

    Args:
      saved_model_dir: A local SavedModel directory.
      signature: The signature's name.

    Returns:
      `{name: (dtype, shape)}`, or None if the SavedModel has no such signature.
    """
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    for graph in saved.meta_graphs:
        if signature in graph.signature_def:
            return {name: (tf.dtypes.as_dtype(info.dtype).name, _shape(info.tensor_shape))
                    for name, info in sorted(graph.signature_def[signature].inputs.items())}
    return None


def _shape(proto) -> Optional[Tuple[Optional[int], ...]]:
    if proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else int(d.size) for d in proto.dim)


def describe(inputs: Dict[str, InputSpec]) -> str:
    """`'image' uint8 [batch, 28, 28]`, one per input, joined by `, `."""
    return ", ".join(f"{name!r} {dtype} {_describe_shape(shape)}"
                     for name, (dtype, shape) in inputs.items())


def _describe_shape(shape: Optional[Sequence[Optional[int]]]) -> str:
    if shape is None:
        return "of any shape"
    dims = ["batch" if i == 0 and d is None else ("any" if d is None else str(d))
            for i, d in enumerate(shape)]
    return "[" + ", ".join(dims) + "]"


def _fits(given: Optional[Sequence[Optional[int]]], wanted: Sequence[Optional[int]]) -> bool:
    """Whether a signature shape accepts tensors of `wanted` (None dims: any size)."""
    if given is None:
        return True
    return len(given) == len(wanted) and all(
        g is None or w is None or g == w for g, w in zip(given, wanted))


def expected_inputs(meta: ds.DatasetMetadata, served: bool = False) -> Dict[str, InputSpec]:
    """What a model of the dataset takes: the preprocessed example (`served=False`, its input
    named `input`) or the serving signature's raw inputs (`served=True`)."""
    if served:
        return {i.name: (i.dtype, tuple(i.shape)) for i in serving_inputs(meta)}
    return {"input": ("float32", (None, *ds.model_input_shape(meta)))}


def _dataset_words(meta: ds.DatasetMetadata) -> str:
    feature = meta.feature
    if feature.key == ds.IMAGE_KEY:
        return f"{'x'.join(map(str, feature.shape))} images"
    columns = len(feature.columns or ()) + len(feature.categorical_columns or ())
    return f"a table of {columns} feature column(s)"


def mismatch(saved_model_dir: str, meta: ds.DatasetMetadata, *,
             served: bool = False) -> Optional[str]:
    """Why a SavedModel cannot take the dataset's examples, in one line; None if it can.

    Args:
      saved_model_dir: A local SavedModel directory (holding `saved_model.pb`).
      meta: The dataset's metadata.
      served: Check a serving model's raw inputs (`serving_model/`, an export)
        instead of a trained model's preprocessed input (`saved_model/`).

    Returns:
      None when the `serving_default` signature fits, else what the model takes
      and what the dataset holds.
    """
    inputs = signature_inputs(saved_model_dir)
    wanted = expected_inputs(meta, served)
    if served:
        holds = f"the dataset holds {_dataset_words(meta)}, served as {describe(wanted)}"
    else:
        [(_, shape)] = wanted.values()
        holds = (f"the dataset holds {_dataset_words(meta)}, fed to the model as float32 "
                 f"{_describe_shape(shape)} (its recorded preprocessing applied); build the "
                 f"model's input from the dataset (kfdist.program.input_shape() is "
                 f"{tuple(shape[1:])})")
    if inputs is None:
        return (f"the SavedModel in {saved_model_dir} has no {SIGNATURE_NAME!r} signature to "
                f"feed; {holds}")
    if served:
        fits = set(inputs) == set(wanted) and all(
            inputs[n][0] == wanted[n][0] and _fits(inputs[n][1], wanted[n][1]) for n in wanted)
    else:
        fits = len(inputs) == 1 and all(d in _FLOATING and _fits(s, shape)
                                        for d, s in inputs.values())
    if fits:
        return None
    return f"the model does not fit the dataset: it takes {describe(inputs)}; {holds}"
