"""Helpers shared by the benchmarks: synthetic data, child-process measurements, tables."""

from __future__ import annotations

import gzip
import json
import os
import platform
import struct
import subprocess
import sys
from typing import Any, Dict, List, Sequence

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Every child runs with these (legacy Keras, quiet TensorFlow).
CHILD_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}


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


def write_synthetic_mnist(out_dir: str, num_examples: int, seed: int = 0,
                          prefix: str = "train") -> Dict[str, int]:
    """Writes `num_examples` 28x28 digits as MNIST IDX gzip files (`<prefix>-*`).

    The bundled sample digits, tiled and shifted by up to 2 pixels with a
    little noise, so every example is distinct (the split hashes content) and
    the files compress like real digits. `prefix="t10k"` writes MNIST's test
    files, which kfdist keeps as the eval split.

    Returns:
      Bytes of the uncompressed images and labels.
    """
    from kfdist.sample_data import digits_as_mnist

    images, labels = digits_as_mnist()
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(labels), num_examples)
    shifts = rng.integers(-2, 3, size=(num_examples, 2))
    out = np.empty((num_examples, 28, 28), np.uint8)
    for i in range(0, num_examples, 65_536):
        block = images[picks[i:i + 65_536]].astype(np.int16)
        block_shifts = shifts[i:i + 65_536]
        for dy, dx in {tuple(s) for s in block_shifts.tolist()}:
            rows = np.flatnonzero((block_shifts[:, 0] == dy) & (block_shifts[:, 1] == dx))
            block[rows] = np.roll(block[rows], (dy, dx), axis=(1, 2))
        noise = rng.integers(0, 8, size=block.shape, dtype=np.int16)
        out[i:i + 65_536] = np.clip(block + noise, 0, 255).astype(np.uint8)
    os.makedirs(out_dir, exist_ok=True)
    with gzip.open(os.path.join(out_dir, f"{prefix}-images-idx3-ubyte.gz"), "wb",
                   compresslevel=1) as f:
        f.write(struct.pack(">IIII", 2051, num_examples, 28, 28))
        f.write(out.tobytes())
    with gzip.open(os.path.join(out_dir, f"{prefix}-labels-idx1-ubyte.gz"), "wb",
                   compresslevel=1) as f:
        f.write(struct.pack(">II", 2049, num_examples))
        f.write(labels[picks].astype(np.uint8).tobytes())
    return {"image_bytes": out.nbytes, "label_bytes": num_examples}


#: Columns of the synthetic table: an id, numeric features, two string columns, the label.
CSV_NUMERIC_COLUMNS = 120
CSV_COLORS = ("red", "green", "blue", "amber", "violet", "teal", "ochre")
CSV_SIZES = ("S", "M", "L", "XL")


def write_synthetic_csv(out_dir: str, target_bytes: int, parts: int = 8,
                        seed: int = 0) -> Dict[str, int]:
    """Writes a CSV table of about `target_bytes` in `parts` files: wide rows like a feature table's.

    Columns: `id`, `x0..x119` (4-digit floats, 2 % of cells empty = missing),
    `color` and `size` (strings), `label` (4 classes that depend on `x0` and
    `color`, so a model can learn them). The files are named like an export's
    parts (`table-00000-of-00008.csv`). pyarrow writes them (about 40 MB/s).

    Returns:
      `{"rows": ..., "bytes": ...}` over all parts.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(CSV_NUMERIC_COLUMNS)]
    schema = pa.schema([("id", pa.int64())] + [(n, pa.float64()) for n in names]
                       + [("color", pa.string()), ("size", pa.string()), ("label", pa.int64())])
    colors, sizes = np.array(CSV_COLORS), np.array(CSV_SIZES)
    rows = total = 0
    os.makedirs(out_dir, exist_ok=True)
    for part in range(parts):
        path = os.path.join(out_dir, f"table-{part:05d}-of-{parts:05d}.csv")
        with pcsv.CSVWriter(path, schema) as writer:
            while os.path.getsize(path) < target_bytes / parts:
                n = int(min(50_000, max(500, (target_bytes / parts - os.path.getsize(path)) // 900)))
                x = rng.normal(size=(n, CSV_NUMERIC_COLUMNS)).round(4)
                missing = rng.random(x.shape) < 0.02
                color = rng.integers(0, len(colors), n)
                columns = [pa.array(np.arange(rows, rows + n))]
                columns += [pa.array(x[:, i], mask=missing[:, i]) for i in range(x.shape[1])]
                columns += [pa.array(colors[color]),
                            pa.array(sizes[rng.integers(0, len(sizes), n)]),
                            pa.array((x[:, 0] > 0).astype(np.int64) + 2 * (color % 2))]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
                rows += n
        total += os.path.getsize(path)
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
