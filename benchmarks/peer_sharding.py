"""Sharding plus statistics: kfdist's shard step against TFX's ExampleGen and Transform analysis.

The same CSV table (`common.write_synthetic_csv`: 120 float columns, 2 string columns, a label;
1 GB in the full run) goes through:

* kfdist's shard step, local runner: shards, the split, and the statistics it records (every
  numeric column's mean and standard deviation, every string column's vocabulary, the classes);
* kfdist's shard step, Beam runner (DirectRunner, 2 workers): the same dataset;
* the peer (`peers/tfx_examplegen.py`, in the peer environment): CsvExampleGen's decoding to
  `tf.Example`s in GZIP TFRecords, then Transform's analysis of the same statistics, both on
  Beam's DirectRunner with 2 worker processes.

Each runs as its own process tree, `repeats.REPEATS` rounds in alternating order; per run its
`pipeline_seconds` (start to the end of its pipeline: the peer counts its output records after
that, outside the clock), the peak of its tree's summed proportional set size (PSS, sampled every
0.2 s, Beam's workers included; a shared library page counts once) and its output size. Reported
per contender as median and spread, with kfdist's ratios to TFX per round: the local runner's
speed-up and memory, and the Beam runner's (the same DirectRunner with 2 workers as TFX's). A run
whose output lacks rows of the table did less work: it is not counted and runs again
(`complete_run`; one of TFX's runs on DirectRunner once wrote 1,029,696 of 1,122,068).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any, Callable, Dict

from benchmarks import peers, repeats, sharding_children
from benchmarks.common import CHILD_ENV, REPO_ROOT, write_synthetic_csv

WORKERS = 2
_PRINT = "\nimport json as _j\nprint(_j.dumps(_RESULT))\n"


def _kfdist(program: str, *args: str) -> Dict[str, Any]:
    env = dict(os.environ, **CHILD_ENV)
    env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return peers.run_tree([sys.executable, "-c", program + _PRINT, *args], env=env)


#: Runs of a contender, at most, to get one whose output holds every row of the table.
ATTEMPTS = 3


def complete_run(name: str, make: Callable[[], Dict[str, Any]], rows: int,
                 log: Callable[[str], None], attempts: int = ATTEMPTS) -> Dict[str, Any]:
    """`make()`'s figures once its output holds all `rows` examples: a run that wrote fewer did
    less work than the others and is run again (listed under `rejected_runs`).

    Raises:
      RuntimeError: `attempts` runs in a row wrote fewer rows.
    """
    rejected = []
    for _ in range(attempts):
        result = make()
        if result["examples"] == rows:
            return dict(result, rejected_runs=rejected) if rejected else result
        log(f"{name} wrote {result['examples']} of {rows} rows: not counted, run again")
        rejected.append({k: result.get(k) for k in ("examples", "pipeline_seconds")})
    raise RuntimeError(f"{name} wrote fewer than the table's {rows} rows in {attempts} runs: "
                       f"{[r['examples'] for r in rejected]}")


def _contenders(python: str, source: str, root: str, rows: int,
                log: Callable[[str], None]) -> Dict[str, Callable[[int], Dict[str, Any]]]:
    """Each contender as a function of the round (its output removed after it is measured)."""
    def run(name: str, make: Callable[[str], Dict[str, Any]]) -> Callable[[int], Dict[str, Any]]:
        def go(index: int) -> Dict[str, Any]:
            out = os.path.join(root, f"peer-{name}-{index}")

            def once() -> Dict[str, Any]:
                try:
                    return make(out)
                finally:
                    shutil.rmtree(out, ignore_errors=True)
            return complete_run(name, once, rows, log)
        return go

    return {
        "kfdist_local": run("local", lambda out: _kfdist(sharding_children.LOCAL, source, out,
                                                        "csv")),
        "kfdist_beam": run("beam", lambda out: _kfdist(sharding_children.BEAM, source, out, "csv",
                                                      str(WORKERS))),
        "tfx": run("tfx", lambda out: peers.run_tree(
            [python, os.path.join(peers.HERE, "tfx_examplegen.py"), "--csv-glob",
             os.path.join(source, "*.csv"), "--out", out, "--workers", str(WORKERS)],
            env=peers.peer_env())),
    }


def measure(csv_bytes: int, root: str, log: Callable[[str], None],
            rounds: int = repeats.REPEATS) -> Dict[str, Any]:
    """Runs the three contenders `rounds` times on one table; returns their figures and the
    ratios, each as median and spread."""
    python = peers.peer_python(log)
    source = os.path.join(root, "peer-csv")
    table = write_synthetic_csv(source, csv_bytes)
    log(f"peers sharding: {table['bytes'] / 1e6:.0f} MB, {table['rows']} rows")
    contenders = _contenders(python, source, root, table["rows"],
                             lambda line: log(f"peers sharding: {line}"))
    runs = dict(zip(contenders, repeats.run_alternating(
        list(contenders.values()), rounds, lambda line: log(f"peers sharding: {line}"),
        pair="1gb-csv")))
    result: Dict[str, Any] = {"csv_bytes": table["bytes"], "rows": table["rows"],
                              "beam_workers": WORKERS, "rounds": rounds}
    for name, side in runs.items():
        result[name] = {"runs": side, **repeats.spreads_of(
            side, ("pipeline_seconds", "wall_seconds", "peak_tree_pss_mb", "output_bytes"))}
    tfx = runs["tfx"]
    for name in ("kfdist_local", "kfdist_beam"):
        ours, short = runs[name], name.replace("kfdist_", "")
        result[f"kfdist_{short}_speedup_over_tfx"] = repeats.ratios(
            [r["pipeline_seconds"] for r in tfx], [r["pipeline_seconds"] for r in ours])
        result[f"kfdist_{short}_memory_over_tfx"] = repeats.ratios(
            [r["peak_tree_pss_mb"] for r in ours], [r["peak_tree_pss_mb"] for r in tfx])
    result["kfdist_local_output_over_tfx"] = round(
        runs["kfdist_local"][0]["output_bytes"] / tfx[0]["output_bytes"], 2)
    return result


if __name__ == "__main__":  # python -m benchmarks.peer_sharding BYTES [ROUNDS]: one run, printed
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kfdist-peers-") as tmp:
        print(json.dumps(measure(int(float(sys.argv[1])), tmp,
                                 lambda line: print(line, file=sys.stderr, flush=True),
                                 *[int(a) for a in sys.argv[2:3]]), indent=2))
