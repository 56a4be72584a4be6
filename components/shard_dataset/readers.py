"""Finding a source's files, telling its format, and opening the right reader.

Formats are told apart by file names:

* `mnist_idx`: `X-images-idx3-ubyte[.gz]` with `X-labels-idx1-ubyte[.gz]`
  (`X-images.idx3-ubyte` too);
* `csv`: `*.csv`, `*.csv.gz`;
* `tfrecord`: `*.tfrecord`, `*.tfrecords`, `*.tfr`, optionally with a
  `-00000-of-00010` suffix and/or `.gz`;
* `image_folder`: `*.png`, `*.jpg`, `*.jpeg`, `*.gif`, `*.bmp` in one
  sub-folder per class (see `image_folder`).

`images` stands for either image format, `tfrecord` or `image_folder`, told
apart by the names (a single file is read as TFRecord whatever its name); a
source of another format (a CSV table) is refused, naming its files.

A source is a file, a directory (searched recursively) or a glob. With an
explicit format, a single file is read whatever its name; in a directory only
the files named like that format are.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Sequence

from kfdist.components.common import listing, storage
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.csv_reader import is_csv_file, open_csv_source
from kfdist.components.shard_dataset.idx_reader import is_idx_file, open_idx_source
from kfdist.components.shard_dataset.image_folder import (
    IMAGE_FOLDER, IMAGE_SUFFIXES, LAYOUT, is_image_file, open_image_folder_source)
from kfdist.components.common.dataset_spec import REGRESSION
from kfdist.components.shard_dataset.source import ReaderOptions, Source
from kfdist.components.shard_dataset.tfrecord_reader import (
    is_tfrecord_file, open_tfrecord_source)

AUTO = "auto"
#: Either image format (`IMAGE_FORMATS`), whichever the source's files are.
IMAGES = "images"
SOURCE_FORMATS = ("mnist_idx", "csv", "tfrecord", IMAGE_FOLDER)
IMAGE_FORMATS = ("tfrecord", IMAGE_FOLDER)
IMAGES_TAKEN = (f"images are TFRecord files of tf.train.Example images or {LAYOUT}")
_FORMAT_NAMES = {"mnist_idx": "MNIST IDX files", "csv": "a CSV table"}

_NAME_MATCHERS: Dict[str, Callable[[str], bool]] = {
    "mnist_idx": is_idx_file,
    "csv": is_csv_file,
    "tfrecord": is_tfrecord_file,
    IMAGE_FOLDER: is_image_file,
}
_OPENERS: Dict[str, Callable[[Sequence[str], ReaderOptions], Source]] = {
    "mnist_idx": open_idx_source,
    "csv": open_csv_source,
    "tfrecord": open_tfrecord_source,
}


def check_source_format(source_format: str) -> None:
    """Raises `InvalidInputError` unless `source_format` is `auto`, `images` or a known format."""
    require(source_format in (AUTO, IMAGES) or source_format in SOURCE_FORMATS,
            f"unknown source_format {source_format!r}; expected one of "
            f"{[AUTO, IMAGES, *SOURCE_FORMATS]}")


def list_source_files(local_path: str) -> List[str]:
    """Lists the readable files of a local source (file, directory or glob).

    Hidden files (`.name`) are skipped.

    Raises:
      InvalidInputError: If nothing exists there.
    """
    files = [listed.uri for listed in listing.source_files(local_path)]
    require(bool(files), f"no such file or directory, or it is empty: {local_path!r}")
    return files


def detect_format(files: Sequence[str]) -> str:
    """Tells the format of `files` by their names.

    Raises:
      InvalidInputError: If no format, or more than one, matches.
    """
    matches = [fmt for fmt, named_like in _NAME_MATCHERS.items()
               if any(named_like(f) for f in files)]
    names = [os.path.basename(f) for f in files][:10]
    require(len(matches) <= 1,
            f"the source mixes formats {matches} (files {names}); "
            "pass source_format to choose one")
    require(len(matches) == 1,
            f"cannot tell the format of {names}: expected MNIST IDX "
            "(X-images-idx3-ubyte.gz + X-labels-idx1-ubyte.gz), *.csv, *.tfrecord[.gz] or "
            f"{LAYOUT}; rename the files or pass source_format")
    return matches[0]


def detect_image_format(files: Sequence[str], single_file: bool) -> str:
    """Tells which image format, `tfrecord` or `image_folder`, `files` are in.

    Args:
      files: Every file of the source.
      single_file: Whether the user named exactly one file (read as TFRecord
        whatever its name, unless it is named like another format).

    Raises:
      InvalidInputError: If the files are of another format (a CSV table), of
        both image formats, or of none.
    """
    names = [os.path.basename(f) for f in files][:10]
    kinds = [fmt for fmt in IMAGE_FORMATS if any(_NAME_MATCHERS[fmt](f) for f in files)]
    others = [fmt for fmt in _FORMAT_NAMES if any(_NAME_MATCHERS[fmt](f) for f in files)]
    subject = f"{names[0]!r} is" if single_file else f"the files {names} are"
    require(not others or bool(kinds),
            f"{subject} {' and '.join(_FORMAT_NAMES[f] for f in others)}, not images: "
            f"{IMAGES_TAKEN}" + ("; a CSV table goes to the tabular pipeline" if "csv" in others
                                 else ""))
    require(len(kinds) + len(others) <= 1,
            f"the source mixes {' and '.join(kinds + others)} files ({names}); {IMAGES_TAKEN}, "
            "nothing else: move the other files out")
    require(bool(kinds) or single_file,
            f"no TFRecord or image files among {names}: {IMAGES_TAKEN}")
    return kinds[0] if kinds else "tfrecord"


def select_files(files: Sequence[str], source_format: str, single_file: bool) -> List[str]:
    """The files of `source_format` among `files`.

    Args:
      files: Every file of the source.
      source_format: A known format.
      single_file: Whether the user named exactly one file (then it is read
        whatever its name, except IDX, which needs its partner's name).

    Raises:
      InvalidInputError: If none of `files` is of that format.
    """
    if single_file and source_format != "mnist_idx":
        return list(files)
    selected = [f for f in files if _NAME_MATCHERS[source_format](f)]
    require(bool(selected), f"no {source_format} files among "
                            f"{[os.path.basename(f) for f in files][:10]}")
    return selected


def open_source(local_path: str, source_format: str, options: ReaderOptions) -> Source:
    """Finds, validates and opens the source at `local_path`.

    For IDX, a single named images (or labels) file is read with its partner
    from the same directory.

    Args:
      local_path: A local file, directory or glob (stage a remote one first).
      source_format: `auto` or one of `SOURCE_FORMATS`.
      options: Label column and image shape.

    Returns:
      The validated `Source`.

    Raises:
      InvalidInputError: If the source is missing, of an unknown format, or invalid.
    """
    check_source_format(source_format)
    files = list_source_files(local_path)
    single_file = os.path.isfile(local_path)
    if source_format == IMAGES:
        fmt = detect_image_format(files, single_file)
    else:
        fmt = detect_format(files) if source_format == AUTO else source_format
    if fmt == "mnist_idx" and single_file:
        files = list_source_files(os.path.dirname(os.path.abspath(local_path)))
        prefix = os.path.basename(local_path).split("-images")[0].split("-labels")[0]
        files = [f for f in files if os.path.basename(f).startswith(prefix + "-")]
    require(fmt == "csv" or not options.exclude_columns,
            f"exclude_columns {list(options.exclude_columns)} applies to CSV sources (their "
            f"columns); this source is {fmt}: leave exclude_columns empty")
    require(fmt == "csv" or options.task != REGRESSION,
            f"task=regression predicts a number of a CSV table's label column; this source is "
            f"{fmt}, whose labels are classes: leave task at auto or classification")
    require(fmt != IMAGE_FOLDER or os.path.isdir(local_path),
            f"{local_path!r} is not a folder; {IMAGE_FOLDER} sources are {LAYOUT}: pass the folder")
    selected = select_files(files, fmt, single_file)
    strays = sorted(set(files) - set(selected)) if fmt == IMAGE_FOLDER else []
    require(not strays,
            f"{os.path.relpath(strays[0], local_path) if strays else ''!r} is not an image file "
            f"(by its name: {', '.join(IMAGE_SUFFIXES)}); {IMAGE_FOLDER} sources are {LAYOUT} "
            "and nothing else: move it out of the folder")
    try:
        if fmt == IMAGE_FOLDER:
            return open_image_folder_source(local_path, selected, options)
        return _OPENERS[fmt](selected, options)
    except InvalidInputError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read the {fmt} source {local_path!r}: {e}") from e
