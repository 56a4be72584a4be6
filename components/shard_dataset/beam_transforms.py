"""What the Beam workers of `shard_dataset(runner="beam")` run: read, split, encode, place, write.

Every function here runs on a Beam worker (a local process, a Dataflow VM, a
Flink task manager) and is pickled there with its arguments.

Placement is order-independent, so any number of workers writes the same
shards: a record's position `p` in its split (source order: unit, batch,
row) comes from per-batch counts turned into offsets; its shard is a seeded
permutation of the shards for each block of `num_shards` positions (shard
sizes differ by at most one record, the local writer's bound); inside a
shard, records are ordered by a seeded hash of their position.
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import os
import random
from typing import Dict, Iterator, List, Mapping, Tuple

import numpy as np

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.components.shard_dataset.scan import RunningMoments
from kfdist.components.shard_dataset.source import check_labels
from kfdist.components.shard_dataset.tfrecord_framing import GZIP_LEVEL, frame_all
from kfdist.components.shard_dataset.writer import shard_relpath

SPLIT_NAMES = ("train", "eval")
ERRORS = "errors"
#: `(unit, batch)`: a batch's place in the source's reading order.
BatchKey = Tuple[int, int]


def read_unit(unit: int, source, split_mask) -> Iterator[dict]:
    """Reads one unit of the source: per batch, its records by split and its train statistics.

    Yields `{"key": (unit, batch), "records": {split: [bytes]}, "max_label": int,
    "moments": (count, mean, m2) or None, "values": [Counter per string column] or None}`,
    or, when the unit holds invalid input, one `{"key": (unit, -1), "error": message}`.
    """
    feature = source.feature
    encoder = CanonicalExampleEncoder(
        feature.key, (1 if feature.dtype == "uint8" else 4) * int(np.prod(feature.shape)))
    vector = len(feature.shape) == 1 and feature.dtype == "float32"
    try:
        for index, batch in enumerate(source.read_unit(unit)):
            check_labels(batch.labels, batch.origin)
            in_eval = split_mask(batch)
            yield _batch_summary((unit, index), batch, in_eval, encoder, vector)
    except InvalidInputError as e:  # reported by the driver, as the local path raises it
        yield {"key": (unit, -1), "error": str(e)}


def _batch_summary(key: BatchKey, batch, in_eval: np.ndarray, encoder, vector: bool) -> dict:
    records = {}
    for split, mask in (("train", ~in_eval), ("eval", in_eval)):
        strings = batch.categorical[mask] if batch.categorical is not None else None
        records[split] = encoder.encode(batch.inputs[mask], batch.labels[mask], strings)
    moments = None
    if vector:
        partial = RunningMoments(batch.inputs.shape[1])
        partial.update(batch.inputs[~in_eval])
        moments = (partial.count, partial.mean, partial.m2)
    values = None
    if batch.categorical is not None:
        train = batch.categorical[~in_eval]
        values = [collections.Counter(train[:, c].tolist()) for c in range(train.shape[1])]
    return {"key": key, "records": records, "moments": moments, "values": values,
            "max_label": int(batch.labels.max()) if len(batch.labels) else -1,
            "reader": os.getpid()}


def offsets(counts: Mapping[BatchKey, Mapping[str, int]]) -> Dict[BatchKey, Dict[str, int]]:
    """Each batch's first position in each split, in the source's reading order."""
    running: collections.Counter = collections.Counter()
    out = {}
    for key in sorted(counts):
        out[key] = {split: running[split] for split in SPLIT_NAMES}
        running.update(counts[key])
    return out


def _order_key(seed: int, split: str, position: int) -> bytes:
    return hashlib.blake2b(f"{seed}:{split}:{position}".encode(), digest_size=8).digest()


def place(summary: dict, first: Mapping[BatchKey, Mapping[str, int]],
          num_shards: Mapping[str, int], seed: int) -> Iterator[tuple]:
    """`((split, shard), (order key, record))` for each record of a batch (see the module)."""
    for split, records in summary["records"].items():
        n, start = num_shards[split], first[summary["key"]][split]
        permutations: Dict[int, List[int]] = {}
        for offset, record in enumerate(records):
            position = start + offset
            block = position // n
            if block not in permutations:
                rng = random.Random(f"kfdist.shard_dataset.beam:{seed}:{split}:{block}")
                permutations[block] = rng.sample(range(n), n)
            yield (split, permutations[block][position % n]), (_order_key(seed, split, position),
                                                               record)


def write_shard(group: tuple, root: str, num_shards: Mapping[str, int], compression) -> dict:
    """Writes one shard file under `root`; returns its `ShardInfo` fields."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    (split, shard), items = group
    items = sorted(items)
    data = frame_all(record for _, record in items)
    if compression == "GZIP":
        data = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    relpath = shard_relpath(split, shard, num_shards[split], compression)
    # UNCOMPRESSED: the bytes are final (AUTO would gzip a `.gz` path a second time).
    with FileSystems.create(FileSystems.join(root, relpath),
                            compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return {"path": relpath, "num_examples": len(items),
            "sha256": hashlib.sha256(data).hexdigest(), "num_bytes": len(data)}
