"""End to end at size: `kfdist run tabular` against TFX's pipeline on the benchmark's wide table.

The penguins (`peer_end_to_end`) have 344 rows, so there both pipelines mostly measure their
fixed costs. Here the same comparison runs on the first `rows` rows of the synthetic table
(`common.write_synthetic_csv`: an `id`, 120 float columns with 2 % of the cells empty, the
string columns `color` and `size`, a 4-class `label`; 1,000,000 rows in the full run), split the
same way for both (every fifth row held out: kfdist's `train/` and `eval/` folders, the peer's
two files). The `id` is an identifier, not a feature: kfdist leaves it out with
`--exclude-columns`, the peer leaves it out of its schema (`--drop`). Both train the same MLP
with the same epochs, batch, learning rate and blessing threshold (`SETTINGS`).

Reported as for the penguins (rounds alternating; time per step, pipeline time, held-out
accuracy, blessing, raw-row answers, kfdist's speed-up, the accuracy difference), with the
table's rows and bytes, and, when the penguins ran in the same run, an estimate of TFX's fixed
costs: its median pipeline time on the penguins less its Trainer's, where every component's data
is a few hundred rows (a lower bound: the penguins have 7 columns, the table 124).
"""

from __future__ import annotations

import glob
import json
import os
import sys
from typing import Any, Callable, Dict, Optional

from benchmarks import peer_end_to_end, repeats
from benchmarks.common import write_synthetic_csv

#: Training settings for both: a few passes in batches of 256 over the larger table. The
#: threshold is one both pass at any size: about 0.71 after the 30 steps of 3,000 rows, about
#: 0.98 after the 940 of 100,000.
SETTINGS = {"epochs": 3, "batch_size": 256, "learning_rate": 0.01, "threshold": 0.6}
LABEL = "label"
#: Columns that identify rows, left out of both pipelines.
EXCLUDE = ("id",)
#: Generous bytes per row of the synthetic table (its rows are about 900 bytes).
ROW_BYTES = 1_000


def write_table(root: str, rows: int) -> Dict[str, Any]:
    """The synthetic table's first `rows` rows, split for both pipelines (`write_splits`).

    Raises:
      RuntimeError: If the generated table has fewer rows than asked for.
    """
    source = os.path.join(root, "at-size-source")
    table = write_synthetic_csv(source, rows * ROW_BYTES, parts=1)
    if table["rows"] < rows:
        raise RuntimeError(f"the synthetic table has {table['rows']} rows, not {rows}")
    [path] = glob.glob(os.path.join(source, "*.csv"))
    paths = peer_end_to_end.write_splits(root, path, name="at-size", rows=rows)
    os.remove(path)
    return paths


def fixed_costs(tfx: Dict[str, Any], penguins: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """TFX's fixed costs, estimated from its penguins run, and their share of `tfx`'s time.

    Args:
      tfx: The peer's figures at size.
      penguins: `peers_penguins`' figures from the same run, or None (then nothing is told).
    """
    if not penguins:
        return {"tfx_fixed_seconds": None, "tfx_fixed_share": None}
    small = penguins["tfx"]
    fixed = (small["pipeline_seconds"]["median"]
             - small["median_step_seconds"].get("Trainer", 0.0))
    return {"tfx_fixed_seconds": round(fixed, 2),
            "tfx_fixed_share": round(fixed / tfx["pipeline_seconds"]["median"], 3)}


def measure(rows: int, root: str, log: Callable[[str], None],
            penguins: Optional[Dict[str, Any]] = None,
            rounds: int = repeats.REPEATS) -> Dict[str, Any]:
    """Both pipelines `rounds` times on `rows` rows of the synthetic table; their figures and
    the ratios, as median and spread.

    Args:
      rows: Data rows of the table, both splits together.
      root: A scratch directory.
      log: Receives progress lines.
      penguins: `peers_penguins`' figures from the same run, for TFX's fixed costs; or None.
      rounds: How many rounds.
    """
    paths = write_table(root, rows)
    log(f"peers at size: {rows:,} rows, {paths['bytes'] / 1e6:.0f} MB")
    result = peer_end_to_end.compare(paths, root, log, name="at-size", settings=SETTINGS,
                                     label=LABEL, exclude=EXCLUDE, rounds=rounds)
    result.update(table_rows=rows, table_bytes=paths["bytes"], excluded=list(EXCLUDE),
                  **fixed_costs(result["tfx"], penguins))
    return result


if __name__ == "__main__":  # python -m benchmarks.peer_at_size ROWS: one run, printed
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kfdist-peers-") as tmp:
        print(json.dumps(measure(int(float(sys.argv[1])), tmp,
                                 lambda line: print(line, file=sys.stderr, flush=True)),
                         indent=2))
