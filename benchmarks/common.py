"""Helpers shared by the benchmarks: synthetic data, child-process measurements, tables."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Every child runs with these (legacy Keras, quiet TensorFlow).
CHILD_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def started_bed(*up_args: str) -> Iterator[str]:
    """Yields the directory of the project's test bed, started here as a person starts it
    (`tests/cluster/up.sh DIR *up_args`; the benchmarks never import the tests), with kfdist's
    runtime image built for its pods; stopped (`down.sh`) after."""
    subprocess.run(["bash", os.path.join(REPO_ROOT, "containers", "build.sh"), "--engine",
                    "podman", "runtime"], check=True, stdout=subprocess.DEVNULL)
    cluster = os.path.join(REPO_ROOT, "tests", "cluster")
    # up.sh and down.sh run in this interpreter's environment, activated or not.
    env = {**os.environ, "PYTHON": sys.executable}
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-bed-") as root:
        try:
            subprocess.run(["bash", os.path.join(cluster, "up.sh"), root, *up_args], check=True,
                           stdout=subprocess.DEVNULL, env=env)
            yield root
        finally:
            subprocess.run(["bash", os.path.join(cluster, "down.sh"), root],
                           stdout=subprocess.DEVNULL, env=env)


def epoch_wall_seconds(history: List[Dict[str, float]]) -> List[float]:
    """Each epoch's wall time in a `history.json`: its steps and its validation."""
    return [e["seconds"] + e.get("validation_seconds", 0.0) for e in history]


def machine() -> Dict[str, Any]:
    """What the numbers were measured on."""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                         platform.processor())
    except OSError:
        model = platform.processor()
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError):
        mem_gib = None
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gib": round(mem_gib or 0, 1),
            "python": platform.python_version(), "platform": platform.platform()}


#: Noise patterns added to the digits (`write_synthetic_mnist`); with the shifts, about 184M
#: distinct images to draw from without replacement.
MNIST_NOISE_PATTERNS = 4096
#: Examples generated (and compressed) at a time, so memory stays flat at any size.
MNIST_BLOCK = 65_536


@functools.lru_cache(maxsize=1)
def _digit_variants() -> Tuple[np.ndarray, np.ndarray]:
    """Every bundled digit at every shift of up to 2 pixels, with room for noise: `(images, labels)`."""
    from kfdist.sample_data import digits_as_mnist

    images, labels = digits_as_mnist()
    images = np.minimum(images, 255 - 7)  # + noise in [0, 8) stays a uint8
    shifted = [np.roll(images, (dy, dx), axis=(1, 2)) for dy in range(-2, 3) for dx in range(-2, 3)]
    return np.concatenate(shifted), np.tile(labels, len(shifted))


def write_synthetic_mnist(out_dir: str, num_examples: int, seed: int = 0,
                          prefix: str = "train") -> None:
    """Writes `num_examples` 28x28 digits as MNIST IDX gzip files (`<prefix>-*`).

    The bundled sample digits, shifted by up to 2 pixels, their ink plus one
    of `MNIST_NOISE_PATTERNS` seeded noise patterns (values 0-7). Each
    (digit, shift, noise) is drawn at most once, so every example is distinct
    (the split hashes content), and the background stays 0, as in scans.
    `prefix="t10k"` writes MNIST's test files, which kfdist keeps as the eval
    split.
    """
    from kfdist.components.shard_dataset.idx_reader import IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC

    variants, variant_labels = _digit_variants()
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 8, size=(MNIST_NOISE_PATTERNS, 28, 28), dtype=np.uint8)
    picks = rng.choice(len(variants) * MNIST_NOISE_PATTERNS, num_examples, replace=False)
    which, pattern = np.divmod(picks, MNIST_NOISE_PATTERNS)
    os.makedirs(out_dir, exist_ok=True)
    with gzip.open(os.path.join(out_dir, f"{prefix}-images-idx3-ubyte.gz"), "wb",
                   compresslevel=1) as f:
        f.write(struct.pack(">IIII", IDX_IMAGES_MAGIC, num_examples, 28, 28))
        for i in range(0, num_examples, MNIST_BLOCK):
            block = variants[which[i:i + MNIST_BLOCK]]
            block += noise[pattern[i:i + MNIST_BLOCK]] * (block > 0)  # ink only
            f.write(memoryview(block).cast("B"))
    with gzip.open(os.path.join(out_dir, f"{prefix}-labels-idx1-ubyte.gz"), "wb",
                   compresslevel=1) as f:
        f.write(struct.pack(">II", IDX_LABELS_MAGIC, num_examples))
        f.write(variant_labels[which].astype(np.uint8).tobytes())


#: Columns of the synthetic table: an id, numeric features, two string columns, the label.
CSV_NUMERIC_COLUMNS = 120
CSV_COLORS = ("red", "green", "blue", "amber", "violet", "teal", "ochre")
CSV_SIZES = ("S", "M", "L", "XL")


#: Distinct feature rows the table's rows are drawn from (`write_synthetic_csv`).
CSV_POOL_ROWS = 65_536


def _csv_row_pool(seed: int) -> Tuple[bytes, List[bytes]]:
    """The table's header line and `CSV_POOL_ROWS` rows without their `id` cell, as pyarrow
    writes them."""
    import io

    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = np.random.default_rng(seed)
    n = CSV_POOL_ROWS
    names = [f"x{i}" for i in range(CSV_NUMERIC_COLUMNS)]
    schema = pa.schema([("id", pa.int64())] + [(name, pa.float64()) for name in names]
                       + [("color", pa.string()), ("size", pa.string()), ("label", pa.int64())])
    x = rng.normal(size=(n, CSV_NUMERIC_COLUMNS)).round(4)
    missing = rng.random(x.shape) < 0.02
    color = rng.integers(0, len(CSV_COLORS), n)
    columns = [pa.array(np.zeros(n, np.int64))]
    columns += [pa.array(x[:, i], mask=missing[:, i]) for i in range(x.shape[1])]
    columns += [pa.array(np.array(CSV_COLORS)[color]),
                pa.array(np.array(CSV_SIZES)[rng.integers(0, len(CSV_SIZES), n)]),
                pa.array((x[:, 0] > 0).astype(np.int64) + 2 * (color % 2))]
    text = io.BytesIO()
    pcsv.write_csv(pa.Table.from_arrays(columns, schema=schema), text)
    header, *lines = text.getvalue().splitlines()
    return header, [line.split(b",", 1)[1] for line in lines]


def write_synthetic_csv(out_dir: str, target_bytes: int, parts: int = 8,
                        seed: int = 0) -> Dict[str, int]:
    """Writes a CSV table of about `target_bytes` in `parts` files: wide rows like a feature table's.

    Columns: `id`, `x0..x119` (4-digit floats, 2 % of cells empty = missing),
    `color` and `size` (strings), `label` (4 classes that depend on `x0` and
    `color`, so a model can learn them). Every row has its own `id`; the
    other cells are one of `CSV_POOL_ROWS` rows that pyarrow formatted, so a
    row costs a line join instead of 120 float formats. The
    files are named like an export's parts (`table-00000-of-00008.csv`).

    Returns:
      `{"rows": ..., "bytes": ..., "files": parts}` over all parts.
    """
    header, pool = _csv_row_pool(seed)
    rng = np.random.default_rng(seed + 1)
    rows = total = 0
    os.makedirs(out_dir, exist_ok=True)
    for part in range(parts):
        path = os.path.join(out_dir, f"table-{part:05d}-of-{parts:05d}.csv")
        with open(path, "wb") as f:
            size = f.write(header + b"\n")
            while size < target_bytes / parts:
                n = int(min(50_000, max(500, (target_bytes / parts - size) // 900)))
                picks = rng.integers(0, len(pool), n).tolist()
                size += f.write(b"".join([b"%d,%s\n" % (rows + i, pool[k])
                                          for i, k in enumerate(picks)]))
                rows += n
        total += size
    return {"rows": rows, "bytes": total, "files": parts}


def run_child(code: str, *args: str, timeout: float = 900) -> Dict[str, Any]:
    """Runs Python `code` in a fresh interpreter; returns the JSON it prints last, plus its peak RSS.

    The child is a separate process so that its peak memory (`ru_maxrss`) is
    its own, and so that imports and caches of one measurement never help
    another.
    """
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork+exec.
    wrapper = code + "\nimport json as _j\n" \
                     "_hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n" \
                     "_RESULT['peak_rss_mb'] = int(_hwm[0].split()[1]) / 1024 if _hwm else None\n" \
                     "print('@@RESULT ' + _j.dumps(_RESULT))\n"
    env = dict(os.environ, **CHILD_ENV)
    env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, "-c", wrapper, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("@@RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"benchmark child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("@@RESULT "):])


def markdown_table(header: Sequence[str], rows: List[Sequence[Any]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
