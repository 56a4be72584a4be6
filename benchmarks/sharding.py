"""Sharding at real sizes: kfdist's local and Beam runners, a naive writer and the byte-copy limit.

Inputs are generated (no download):

* MNIST-shaped digits, at 1x and 10x (70k and 700k examples in the full run),
  as gzip IDX files;
* a CSV table of wide rows (`common.write_synthetic_csv`), 1 GB in 8 files
  in the full run (Beam reads a source's files in parallel, one per worker at
  a time; the local runner reads them in turn).

Each contender runs in its own process on the same input (`sharding_children`):

* local: `shard_dataset`'s default runner (validate, scan, split, shuffle,
  balanced shards, metadata, atomic publish), 8 train shards;
* beam: the same step with `runner=beam` on Beam's FnApiRunner, one worker
  process per core; its peak memory is the driver's, beside the largest
  worker's;
* naive: read the input whole (numpy, pandas), build one `tf.train.Example`
  proto per example, write them all with one `TFRecordWriter`;
* copy limit: copy the local runner's output, a file at a time (the cost of
  writing the bytes at all).

The local runner is also run once under cProfile (MNIST at 1x, the CSV's
first `PROFILE_CSV_ROWS` rows), and its time is split into stages (`STAGES`): that profile
says where the gap to the byte-copy limit goes.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Tuple

from benchmarks import sharding_children as programs
from benchmarks.common import run_child, write_synthetic_csv, write_synthetic_mnist

#: Rows of the CSV the profile reads.
PROFILE_CSV_ROWS = 40_000
#: Profile stages: a function's own time goes to the first stage one of whose patterns it contains.
STAGES: List[Tuple[str, Tuple[str, ...]]] = [
    ("read and decompress the source", ("zlib.Decompress", "gzip.py", "_compression.py",
                                        "BufferedReader", "idx_reader.py", "shard_dataset/csv_",
                                        "pyarrow", "_csv.",
                                        "source.py", "readers.py")),
    ("split: a content hash per example", ("scan.py:example_keys", "blake2b", "splits.py")),
    ("scan: counts and statistics", ("scan.py",)),
    ("encode tf.train.Examples", ("example_encoding.py",)),
    ("shuffle and balance the shards", ("writer.py", "random.py", "Random")),
    ("TFRecord framing and CRC-32C", ("tfrecord_framing.py:frame", "crc32c", "struct")),
    ("write the files, SHA-256", ("write", "sha256", "HASH", "zlib.Compress", "close")),
]


def stage_profile(functions: List[Tuple[str, float]]) -> Dict[str, float]:
    """Share of the wall time per stage (`STAGES`, then `other`), from cProfile's own times."""
    shares: Dict[str, float] = {name: 0.0 for name, _ in STAGES}
    shares["other"] = 0.0
    for where, own in functions:
        stage = next((name for name, patterns in STAGES if any(p in where for p in patterns)),
                     "other")
        shares[stage] += own
    total = sum(shares.values()) or 1.0
    return {name: round(value / total, 3) for name, value in shares.items()}


def _rates(r: Dict[str, Any]) -> Dict[str, Any]:
    out = {"examples_per_second": round(r["examples"] / r["seconds"]),
           "mb_per_second": round(r["output_bytes"] / r["seconds"] / 1e6, 1),
           "seconds": round(r["seconds"], 2), "peak_rss_mb": round(r["peak_rss_mb"]),
           "examples": r["examples"],
           "output_bytes": r["output_bytes"]}
    if "largest_worker_rss_mb" in r:
        out["largest_worker_rss_mb"] = round(r["largest_worker_rss_mb"])
    return out


def _contenders(source: str, fmt: str, root: str, tag: str, naive: str,
                log: Callable[[str], None]) -> Dict[str, Any]:
    """Local, Beam, naive and the copy limit on one input; each output is deleted once measured."""
    out: Dict[str, Any] = {}
    workers = str(os.cpu_count() or 1)
    for name, code, extra in (("local", programs.LOCAL, ()), ("beam", programs.BEAM, (workers,)),
                              ("naive_writer", naive, ())):
        target = os.path.join(root, f"{name}-{tag}")
        log(f"  sharding {tag}: {name} ...")
        out[name] = _rates(run_child(code, source, target, fmt, *extra))
        if name == "local":
            out["copy_limit"] = _copy_limit(target)
        shutil.rmtree(target, ignore_errors=True)
    out["beam_workers"] = int(workers)
    return out


def _copy_limit(tree: str) -> Dict[str, Any]:
    """Copying the local runner's output: the cost of writing its bytes at all."""
    copy = run_child(programs.COPY, tree, tree + "-copy")
    shutil.rmtree(tree + "-copy")
    return {"mb_per_second": round(copy["output_bytes"] / copy["seconds"] / 1e6, 1),
            "seconds": round(copy["seconds"], 3)}


def _ratios(result: Dict[str, Any]) -> None:
    local, beam = result["local"], result["beam"]
    result["local_vs_naive"] = round(local["examples_per_second"]
                                     / result["naive_writer"]["examples_per_second"], 2)
    result["beam_vs_local"] = round(beam["examples_per_second"] / local["examples_per_second"], 2)
    result["local_fraction_of_copy_limit"] = round(local["mb_per_second"]
                                                   / result["copy_limit"]["mb_per_second"], 3)


def measure_mnist(examples: int, root: str, log: Callable[[str], None]) -> Dict[str, Any]:
    """MNIST-shaped digits at 1x and 10x `examples`: every contender, the copy limit, the profile."""
    result: Dict[str, Any] = {"examples_1x": examples}
    for tag, count, seed in (("1x", examples, 1), ("10x", examples * 10, 2)):
        source = os.path.join(root, f"mnist-{tag}")
        write_synthetic_mnist(source, count, seed=seed)
        result[tag] = _contenders(source, "mnist_idx", root, f"mnist-{tag}", programs.NAIVE_IDX, log)
        _ratios(result[tag])
        if tag == "1x":
            result["local_profile"] = _profile(source, "mnist_idx", root)
        shutil.rmtree(source)
    for runner in ("local", "beam"):
        result[f"{runner}_peak_memory_10x_over_1x"] = round(
            result["10x"][runner]["peak_rss_mb"] / result["1x"][runner]["peak_rss_mb"], 2)
    return result


def measure_csv(num_bytes: int, root: str, log: Callable[[str], None]) -> Dict[str, Any]:
    """A generated CSV of about `num_bytes`: every contender, the copy limit, the profile."""
    source = os.path.join(root, "table")
    table = write_synthetic_csv(source, num_bytes)
    result: Dict[str, Any] = {"csv_bytes": table["bytes"], "rows": table["rows"],
                              "csv_files": table["files"]}
    result.update(_contenders(source, "csv", root, "csv", programs.NAIVE_CSV, log))
    result["csv_mb_per_second_local"] = round(table["bytes"] / 1e6 / result["local"]["seconds"], 1)
    _ratios(result)
    # The profile reads the first rows: the same work per row, without profiling all of them.
    first = os.path.join(source, sorted(os.listdir(source))[0])
    result["local_profile"] = _profile(_head(first, os.path.join(root, "profiled.csv"),
                                             PROFILE_CSV_ROWS), "csv", root)
    os.remove(os.path.join(root, "profiled.csv"))
    shutil.rmtree(source)
    return result


def _head(path: str, out: str, rows: int) -> str:
    """Writes the header and the first `rows` rows of the CSV file `path` to `out`."""
    with open(path, "rb") as src, open(out, "wb") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    return out


def _profile(source: str, fmt: str, root: str) -> Dict[str, Any]:
    target = os.path.join(root, "profiled")
    r = run_child(programs.PROFILE, source, target, fmt)
    shutil.rmtree(target, ignore_errors=True)
    return {"seconds_under_profiler": round(r["seconds"], 2),
            "stages": stage_profile(r["functions"])}


def measure(mnist_examples: int, csv_bytes: int,
            log: Callable[[str], None] = lambda line: None) -> Dict[str, Any]:
    """Runs the MNIST (1x and 10x) and CSV measurements; returns every figure and ratio."""
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-shard-") as root:
        return {"mnist": measure_mnist(mnist_examples, root, log),
                "csv": measure_csv(csv_bytes, root, log)}
