"""The inputs of an exported model's serving signature, derived from the dataset's feature spec.

Pure (no TensorFlow): the export step builds the signature from this list and
records it in the export's `kfdist_export.json`, and clients read it there.

* Raw images (MNIST IDX, raw TFRecord pixels): `image`, uint8 `[None, *shape]`.
* Encoded images (PNG, JPEG, ... in the source): `image_bytes`, string `[None]`,
  one encoded image per element, decoded to the dataset's size and channels.
* Tables: one input per source column, named after it: float32 `[None]` for
  a numeric column (NaN for a missing value), string `[None]` for a
  categorical one. Names keep letters, digits, `_`, `.` and `-`; any other
  character becomes `_`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Tuple

from kfdist.components.common.dataset_spec import IMAGE_KEY, DatasetMetadata
from kfdist.components.common.errors import require

RAW_IMAGE, ENCODED_IMAGE, NUMERIC, CATEGORICAL = "image", "encoded_image", "numeric", "categorical"
#: The serving signature's name (TF Serving's default).
SIGNATURE_NAME = "serving_default"
#: A regression's serving output: the predicted number, in the label's units.
VALUE_OUTPUT = "value"
ENCODED_IMAGE_INPUT = "image_bytes"
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.\-]")


@dataclasses.dataclass(frozen=True)
class ServingInput:
    """One input of the serving signature.

    Attributes:
      name: The signature's input name.
      kind: `image`, `encoded_image`, `numeric` or `categorical`.
      dtype: `uint8`, `string` or `float32`.
      shape: Its shape, None for the batch dimension.
      column: The source column it carries (tables only).
    """

    name: str
    kind: str
    dtype: str
    shape: Tuple[Optional[int], ...]
    column: Optional[str] = None


def input_name(column: str) -> str:
    """A column's input name: characters other than letters, digits, `_.-` become `_`."""
    name = _NOT_IN_NAME.sub("_", column)
    return name if re.match(r"[A-Za-z0-9.]", name[:1]) else "c" + name


def serving_inputs(meta: DatasetMetadata) -> List[ServingInput]:
    """The serving signature's inputs for a dataset (see the module docstring).

    Raises:
      InvalidInputError: If two columns get the same input name.
    """
    feature = meta.feature
    if feature.key == IMAGE_KEY:
        if feature.encoding:
            return [ServingInput(ENCODED_IMAGE_INPUT, ENCODED_IMAGE, "string", (None,))]
        return [ServingInput(IMAGE_KEY, RAW_IMAGE, "uint8", (None, *feature.shape))]
    columns = [(c, NUMERIC, "float32") for c in feature.columns or ()]
    columns += [(c, CATEGORICAL, "string") for c in feature.categorical_columns or ()]
    check_input_names([c for c, _, _ in columns])
    return [ServingInput(input_name(c), kind, dtype, (None,), column=c)
            for c, kind, dtype in columns]


def check_input_names(columns: Sequence[str], where: str = "") -> None:
    """Raises `InvalidInputError` if two `columns` would be the same serving input.

    Args:
      columns: A table's feature columns.
      where: Prefix of the message naming the source, e.g. "CSV file 'x.csv': ".
    """
    names: Dict[str, str] = {}
    for column in columns:
        name = input_name(column)
        require(name not in names,
                f"{where}columns {names.get(name)!r} and {column!r} both become the serving "
                f"input {name!r}; rename one of them")
        names[name] = column
