"""etcd against kine as the bed's datastore: `python -m cluster.datastores [REPEATS]` (from
tests/, in the project's environment, with `build.sh kine` done) starts the whole bed on each,
alternating, and prints the time to ready, the datastore's peak resident memory and the time
of 50 ConfigMap writes and a list of them, median and range of the repeats."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cluster import bed, processes

WRITES = 50


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure_once(datastore: str) -> dict:
    """One bed on `datastore`: seconds to ready, peak RSS (MiB), seconds of writes and a list."""
    with tempfile.TemporaryDirectory(prefix=f"kfdist-{datastore}-") as root:
        started = time.monotonic()
        running = bed.start(Path(root), datastore=datastore)
        ready = time.monotonic() - started
        try:
            items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"},
                      "data": {"v": "x" * 1000}} for i in range(WRITES)]
            began = time.monotonic()
            running.kubectl_run("create", "-f", "-", stdin=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": items}))
            running.kubectl_run("get", "configmaps", "-o", "name")
            writes = time.monotonic() - began
            pid = next(e["pid"] for e in processes._read_record(Path(root))
                       if e["name"] == datastore)
            peak = _peak_rss_mib(pid)
        finally:
            bed.stop(Path(root))
    return {"ready_s": ready, "peak_rss_mib": peak, "writes_s": writes}


def main(repeats: int = 3) -> None:
    binaries = bed.build() | bed.build(("kine",))
    runs = {"etcd": [], "kine": []}
    for _ in range(repeats):
        for datastore in ("etcd", "kine"):
            with tempfile.TemporaryDirectory():
                runs[datastore].append(measure_once(datastore))
    del binaries
    for datastore, found in runs.items():
        cells = []
        for key in ("ready_s", "peak_rss_mib", "writes_s"):
            values = [r[key] for r in found]
            cells.append(f"{key} {statistics.median(values):.2f} "
                         f"({min(values):.2f}-{max(values):.2f})")
        print(f"{datastore}: " + ", ".join(cells))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
