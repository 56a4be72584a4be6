"""Sharding plus statistics: kfdist's shard step against TFX's ExampleGen and Transform analysis.

The same CSV table (`common.write_synthetic_csv`: 120 float columns, 2 string columns, a label;
1 GB in the full run) goes through:

* kfdist's shard step, local runner: shards, the split, and the statistics it records (every
  numeric column's mean and standard deviation, every string column's vocabulary, the classes);
* kfdist's shard step, Beam runner (DirectRunner, 2 workers): the same dataset;
* the peer (`peers/tfx_examplegen.py`, in the peer environment): CsvExampleGen's decoding to
  `tf.Example`s in GZIP TFRecords, then Transform's analysis of the same statistics, both on
  Beam's DirectRunner with 2 worker processes.

Each runs as its own process tree; its wall time, the peak of its tree's summed RSS (sampled
every 0.2 s, Beam's workers included) and its output size are reported, and the ratios to
kfdist's local runner.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict

from benchmarks import peers, sharding_children
from benchmarks.common import CHILD_ENV, REPO_ROOT, write_synthetic_csv

WORKERS = 2
_PRINT = "\nimport json as _j\nprint(_j.dumps(_RESULT))\n"


def _kfdist(program: str, *args: str) -> Dict[str, Any]:
    env = dict(os.environ, **CHILD_ENV)
    env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return peers.run_tree([sys.executable, "-c", program + _PRINT, *args], env=env)


def measure(csv_bytes: int, root: str, log: Callable[[str], None]) -> Dict[str, Any]:
    """Runs the three contenders on one table; returns their figures and the ratios."""
    python = peers.peer_python(log)
    source = os.path.join(root, "peer-csv")
    table = write_synthetic_csv(source, csv_bytes)
    log(f"peers sharding: {table['bytes'] / 1e6:.0f} MB, {table['rows']} rows")
    result: Dict[str, Any] = {"csv_bytes": table["bytes"], "rows": table["rows"],
                              "beam_workers": WORKERS}
    result["kfdist_local"] = _kfdist(sharding_children.LOCAL, source,
                                     os.path.join(root, "peer-local"), "csv")
    log(f"peers sharding: kfdist local {result['kfdist_local']['wall_seconds']} s")
    result["kfdist_beam"] = _kfdist(sharding_children.BEAM, source,
                                    os.path.join(root, "peer-beam"), "csv", str(WORKERS))
    log(f"peers sharding: kfdist beam {result['kfdist_beam']['wall_seconds']} s")
    result["tfx"] = peers.run_tree([python, os.path.join(peers.HERE, "tfx_examplegen.py"),
                                    "--csv-glob", os.path.join(source, "*.csv"),
                                    "--out", os.path.join(root, "peer-tfx"),
                                    "--workers", str(WORKERS)], env=peers.peer_env())
    log(f"peers sharding: TFX ExampleGen + Transform analysis {result['tfx']['wall_seconds']} s")
    local, tfx = result["kfdist_local"], result["tfx"]
    result["kfdist_local_speedup_over_tfx"] = round(tfx["wall_seconds"] / local["wall_seconds"], 2)
    result["kfdist_beam_speedup_over_tfx"] = round(
        tfx["wall_seconds"] / result["kfdist_beam"]["wall_seconds"], 2)
    result["kfdist_local_memory_over_tfx"] = round(
        local["peak_tree_rss_mb"] / tfx["peak_tree_rss_mb"], 2)
    result["kfdist_local_output_over_tfx"] = round(local["output_bytes"] / tfx["output_bytes"], 2)
    return result


if __name__ == "__main__":  # python -m benchmarks.peer_sharding BYTES: one run, printed
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kfdist-peers-") as tmp:
        print(json.dumps(measure(int(float(sys.argv[1])), tmp,
                                 lambda line: print(line, file=sys.stderr, flush=True)), indent=2))
