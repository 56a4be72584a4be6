"""Folders of real PNG and JPEG files, one sub-folder per class, made on the fly for the tests."""

from __future__ import annotations

import io
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np

from kfdist.sample_data import digits_as_mnist

#: Class folder → the digit its pictures show; created in this (not alphabetical) order.
DIGIT_CLASSES = {"seven": 7, "one": 1, "four": 4}


def encoded(image: np.ndarray, fmt: str) -> bytes:
    """PNG or JPEG bytes of a uint8 `[rows, cols]` greyscale image."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format=fmt)
    return buffer.getvalue()


def write_image_folder(root: str, per_class: int = 20, classes: Dict[str, int] = DIGIT_CLASSES,
                       splits: Sequence[str] = ()) -> List[Tuple[str, str]]:
    """Writes `per_class` 28×28 digit pictures per class folder, PNG and JPEG alternately.

    Args:
      root: The folder to fill.
      per_class: Files per class (per split folder with `splits`).
      classes: Class folder names and the digit each one's pictures show.
      splits: Split folders (e.g. `("train", "test")`) to put the class folders in.

    Returns:
      `(path, class name)` of every file written.
    """
    images, labels = digits_as_mnist()
    written = []
    for split_index, split in enumerate(splits or ("",)):
        for name, digit in classes.items():
            folder = os.path.join(root, split, name)
            os.makedirs(folder, exist_ok=True)
            pictures = images[labels == digit][split_index * per_class:][:per_class]
            for i, picture in enumerate(pictures):
                fmt = "PNG" if i % 2 == 0 else "JPEG"
                path = os.path.join(folder, f"{i:03d}.{'png' if fmt == 'PNG' else 'jpg'}")
                with open(path, "wb") as f:
                    f.write(encoded(picture, fmt))
                written.append((path, name))
    return written
