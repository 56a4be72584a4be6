"""What the Beam workers of `shard_dataset(runner="beam")` run: scan, place, write.

Every function here runs on a Beam worker (a local process, a Dataflow VM, a
Flink task manager) and is pickled there with its arguments.

The pipeline reads the source twice, as the local runner does:

1. `scan_unit`: per batch, the split counts, the eval mask, a checksum and
   the train statistics. `plan_batches` turns the counts into each batch's
   first position in each split (source order: unit, batch, row), and the
   train split's string values decide which string columns identify rows
   (`categorical`): they are not written, and the label numbers counted decide
   the class ids (`class_ids`).
2. `write_runs` reads the unit again, checks each batch against its scan,
   stores each label's class id, encodes the records and places each one:
   its shard is a seeded rotation of the shards for each block of
   `num_shards` positions (shard sizes differ by at most one record, the
   local writer's bound), its order inside the
   shard a seeded hash of its position. Records go to run files beside the
   shards, so they never pass through the runner; `write_shard` then sorts a
   shard's runs into its TFRecord file.

Placement is order-independent, so any number of workers writes the same
shards.
"""

from __future__ import annotations

import collections
import hashlib
import os
import pickle
from typing import Dict, Iterator, List, Mapping, Sequence, Tuple

import numpy as np

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset.categorical import VocabularyCounter, drop_strings
from kfdist.components.shard_dataset.class_ids import ClassIds, class_ids
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.components.common.class_counts import add_class_counts, sum_counts
from kfdist.components.shard_dataset.moments import RunningMoments
from kfdist.components.shard_dataset.scan import (SourceChangedError, batch_checksum,
                                                  scanned_eval_mask)
from kfdist.components.common.label_numbers import LabelTally
from kfdist.components.shard_dataset.source import check_labels
from kfdist.components.common.tfrecord_framing import frame_all, gzip_bytes
from kfdist.components.shard_dataset.writer import shard_relpath

SPLIT_NAMES = ("train", "eval")
ERRORS = "errors"
#: Where the run files go, under the pipeline's root (deleted by the driver).
RUNS_DIR = "_runs"
#: A worker writes its runs out once it holds this many record bytes.
RUN_FLUSH_BYTES = 64 << 20
#: `(unit, batch)`: a batch's place in the source's reading order.
BatchKey = Tuple[int, int]


def scan_unit(unit: int, source, split_mask) -> Iterator[dict]:
    """Scans one unit of the source: per batch, its split and its train statistics.

    Yields `{"key": (unit, batch), "counts": {split: int}, "eval_mask": packed bits,
    "checksum": int, "max_label": int, "class_counts": {split: [int]},
    "label_tallies": {split: (count, mean, m2, min, max)} (a regression's; else None),
    "moments": (count, mean, m2) or None,
    "values": [Counter per string column] or None, "reader": pid}`, or, when the
    unit holds invalid input, one `{"key": (unit, -1), "error": message}`.
    """
    feature = source.feature
    vector = len(feature.shape) == 1 and feature.dtype == "float32"
    try:
        for index, batch in enumerate(source.read_unit(unit)):
            check_labels(batch.labels, batch.origin)
            yield _batch_scan((unit, index), batch, split_mask(batch), vector)
    except InvalidInputError as e:  # reported by the driver, as the local path raises it
        yield {"key": (unit, -1), "error": str(e)}


def _batch_scan(key: BatchKey, batch, in_eval: np.ndarray, vector: bool) -> dict:
    moments = None
    if vector:
        partial = RunningMoments(batch.inputs.shape[1])
        partial.update(batch.inputs[~in_eval])
        moments = (partial.count, partial.mean, partial.m2)
    values = None
    if batch.categorical is not None:
        train = batch.categorical[~in_eval]
        values = [collections.Counter(train[:, c].tolist()) for c in range(train.shape[1])]
    common = _common(key, batch, in_eval, moments, values)
    if batch.labels.dtype.kind == "f":  # a regression's numbers: their figures, no classes
        return {**common, "max_label": -1, "class_counts": {"train": [], "eval": []},
                "label_tallies": {split: _tally(batch.labels[mask])
                                  for split, mask in (("train", ~in_eval), ("eval", in_eval))}}
    return {**common, "max_label": int(batch.labels.max()) if len(batch.labels) else -1,
            "class_counts": {"train": add_class_counts([], batch.labels[~in_eval]),
                             "eval": add_class_counts([], batch.labels[in_eval])},
            "label_tallies": None}


def _common(key: BatchKey, batch, in_eval: np.ndarray, moments, values) -> dict:
    num_eval = int(in_eval.sum())
    return {"key": key, "counts": {"train": len(in_eval) - num_eval, "eval": num_eval},
            "eval_mask": np.packbits(in_eval), "checksum": batch_checksum(batch),
            "moments": moments, "values": values, "reader": os.getpid()}


def _tally(labels: np.ndarray) -> tuple:
    """`(count, mean, m2, min, max)` of a block of a regression's labels (`LabelTally.merge`)."""
    tally = LabelTally()
    tally.update(labels)
    return tally.count, tally.mean, tally.m2, tally.low, tally.high


def plan_entry(scan: dict) -> tuple:
    """`(key, what write_runs needs of the batch's scan, its string values' and its label
    numbers' counts)`."""
    if "error" in scan:
        return scan["key"], {"error": True}
    return scan["key"], {name: scan[name] for name in (
        "counts", "eval_mask", "checksum", "values", "class_counts")}


def plan_batches(scans: Mapping[BatchKey, dict], strings: Sequence[str] = (),
                 keep_columns: Sequence[str] = (), renumber: bool = False) -> dict:
    """Each scanned batch with its first position in each split, in the source's reading order;
    the units a scan found invalid (not written); the string columns (`strings`) that identify
    rows (`categorical`; not those in `keep_columns`) and the positions of the others; with
    `renumber` (`class_ids.renumbers`), the label numbers in class id order when they are
    not 0..k-1 (`class_ids`)."""
    running: collections.Counter = collections.Counter()
    batches, failed_units = {}, set()
    vocabulary = VocabularyCounter(len(strings))
    per_class: Dict[str, List[int]] = {split: [] for split in SPLIT_NAMES}
    for key in sorted(scans):
        if scans[key].get("error"):
            failed_units.add(key[0])
            continue
        entry = dict(scans[key])
        for column, counter in enumerate(entry.pop("values") or ()):
            vocabulary.counts[column].update(counter)
        for split, counts in entry.pop("class_counts").items():
            per_class[split] = sum_counts(per_class[split], counts)
        batches[key] = dict(entry, first={split: running[split] for split in SPLIT_NAMES})
        running.update(scans[key]["counts"])
    identifiers = [c.name for c in vocabulary.identifiers(strings, keep_columns)]
    ids = class_ids(per_class) if renumber else None
    return {"batches": batches, "failed_units": sorted(failed_units), "identifiers": identifiers,
            "kept_strings": [i for i, c in enumerate(strings) if c not in identifiers],
            "class_ids": ids.numbers if ids is not None else None}


def _mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise: a bijection of uint64 that scatters its input."""
    x = values.astype(np.uint64)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _salt(seed: int, split: str, purpose: str) -> np.uint64:
    digest = hashlib.blake2b(f"kfdist.shard_dataset.beam:{seed}:{split}:{purpose}".encode(),
                             digest_size=8).digest()
    return np.uint64(int.from_bytes(digest, "little"))


def placements(first: int, count: int, num_shards: int, seed: int, split: str
               ) -> Tuple[List[int], List[int]]:
    """Shard and order key of the split's positions `first .. first + count - 1` (see the module)."""
    positions = np.arange(first, first + count, dtype=np.uint64)
    n = np.uint64(num_shards)
    rotation = _mix64((positions // n) ^ _salt(seed, split, "shard")) % n
    shards = (positions % n + rotation) % n
    return shards.tolist(), _mix64(positions ^ _salt(seed, split, "order")).tolist()


def write_runs(unit: int, source, plan: dict, root: str, num_shards: Mapping[str, int],
               seed: int) -> Iterator[tuple]:
    """Reads one unit again and writes its records, placed, to run files under `root`.

    Yields `((split, shard), run path)` per run written, or `(ERRORS, message)`
    when the unit no longer holds what its scan read.
    """
    if unit in plan["failed_units"]:
        return  # its scan reported the error
    encoder = CanonicalExampleEncoder.for_feature(source.feature)
    ids = ClassIds(tuple(plan["class_ids"])) if plan["class_ids"] is not None else None
    runs: Dict[tuple, list] = collections.defaultdict(list)
    held = written = 0
    try:
        for index, batch in enumerate(source.read_unit(unit)):
            scanned = plan["batches"].get((unit, index))
            in_eval = scanned_eval_mask(batch, index, None if scanned is None else (
                scanned["checksum"], scanned["eval_mask"]))
            batch = drop_strings(batch, plan["kept_strings"])  # identifiers: not stored
            batch = ids.renumber(batch) if ids is not None else batch
            for split, mask in (("train", ~in_eval), ("eval", in_eval)):
                records = encoder.encode_split(batch, mask)
                shards, keys = placements(scanned["first"][split], len(records),
                                          num_shards[split], seed, split)
                for shard, key, record in zip(shards, keys, records):
                    runs[split, shard].append((key, record))
                held += sum(map(len, records))
            if held >= RUN_FLUSH_BYTES:
                yield from _flush(runs, root, unit, written)
                held, written = 0, written + 1
    except (InvalidInputError, SourceChangedError) as e:
        yield ERRORS, str(e)
        return
    yield from _flush(runs, root, unit, written)


def _flush(runs: Dict[tuple, list], root: str, unit: int, chunk: int) -> Iterator[tuple]:
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    for (split, shard), items in sorted(runs.items()):
        path = FileSystems.join(root, RUNS_DIR, f"{split}-{shard:05d}-{unit:06d}-{chunk:04d}")
        with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            f.write(pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL))
        yield (split, shard), path
    runs.clear()


def write_shard(group: tuple, root: str, num_shards: Mapping[str, int], compression) -> dict:
    """Writes one shard file under `root` from its runs; returns its `ShardInfo` fields."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    (split, shard), paths = group
    items: List[tuple] = []
    for path in sorted(paths):
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            items.extend(pickle.loads(f.read()))
    items.sort()  # order keys are distinct: records are never compared
    data = frame_all(record for _, record in items)
    if compression == "GZIP":
        data = gzip_bytes(data)
    relpath = shard_relpath(split, shard, num_shards[split], compression)
    # UNCOMPRESSED: the bytes are final (AUTO would gzip a `.gz` path a second time).
    with FileSystems.create(FileSystems.join(root, relpath),
                            compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return {"path": relpath, "num_examples": len(items),
            "sha256": hashlib.sha256(data).hexdigest(), "num_bytes": len(data)}
