"""TFX's batched Example encoder: tfx_bsl's `RecordBatchToExamplesEncoder`, timed on table rows.

Runs in the peer environment:

    python tfx_encoding.py ROWS.npz OUT REPEATS BLOCK

ROWS.npz holds `numbers` (`[n, k]` float32), `strings` (`[n, 2]`) and `labels` (`[n]`), the
columns `library_paths` gives kfdist's encoder. They become Arrow record batches of `BLOCK` rows
(`categorical`, `features`, `label` list columns, as the Examples kfdist writes have them;
made before the clock starts: Arrow is the form TFX's components hand each other), and each
batch is encoded with one encoder, best of `REPEATS`. The Examples go to OUT, each preceded by
its length (8 bytes, little-endian), for the caller to check them against kfdist's. Prints one
JSON line: `seconds` (the best) and `examples`.
"""

import json
import sys
import time

import numpy as np
import pyarrow as pa
from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder


def _lists(values: np.ndarray, kind=None) -> pa.ListArray:
    """`[rows, width]` values as an Arrow list column of `width` values per row."""
    rows, width = values.shape
    offsets = pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values.ravel(), type=kind))


def record_batches(numbers: np.ndarray, strings: np.ndarray, labels: np.ndarray,
                   block: int):
    """The rows as record batches of `block` rows."""
    batches = []
    for start in range(0, len(labels), block):
        part = slice(start, start + block)
        batches.append(pa.RecordBatch.from_arrays(
            [_lists(np.char.encode(strings[part].astype(str)).astype(object), pa.binary()),
             _lists(numbers[part]), _lists(labels[part].reshape(-1, 1).astype(np.int64))],
            ["categorical", "features", "label"]))
    return batches


def main() -> None:
    source, out, repeats, block = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rows = np.load(source)
    batches = record_batches(rows["numbers"], rows["strings"], rows["labels"], block)
    encoder = RecordBatchToExamplesEncoder()
    best, examples = float("inf"), []
    for _ in range(repeats):
        started = time.perf_counter()
        examples = [e for batch in batches for e in encoder.encode(batch)]
        best = min(best, time.perf_counter() - started)
    with open(out, "wb") as f:
        for example in examples:
            f.write(len(example).to_bytes(8, "little") + example)
    print(json.dumps({"seconds": round(best, 4), "examples": len(examples)}))


if __name__ == "__main__":
    main()
