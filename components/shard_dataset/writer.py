"""Writing one split into balanced, shuffled TFRecord shards.

Records pass through a bounded, seeded shuffle buffer (memory does not grow
with the dataset), then go to shards in blocks: every block of `num_shards`
consecutive records is spread over a seeded random permutation of the shards,
so shard sizes never differ by more than one record.
"""

from __future__ import annotations

import os
import random
from typing import Callable, Iterator, List, Optional, Sequence

import numpy as np

from kfdist.components.common.dataset_spec import ShardInfo, SplitInfo
from kfdist.components.common.tfrecord_framing import TFRecordFileWriter

SHARD_SUFFIX = ".tfrecord"
GZIP_SUFFIX = ".gz"


def shard_relpath(split: str, index: int, num_shards: int, compression: Optional[str]) -> str:
    """Path of a shard relative to the dataset root, e.g. `train/shard-00000-of-00004.tfrecord.gz`."""
    suffix = SHARD_SUFFIX + (GZIP_SUFFIX if compression == "GZIP" else "")
    return f"{split}/shard-{index:05d}-of-{num_shards:05d}{suffix}"


class ShuffleBuffer:
    """A bounded random shuffle of a stream (like `tf.data.Dataset.shuffle`)."""

    def __init__(self, capacity: int, rng: random.Random):
        self._capacity = max(1, capacity)
        self._rng = rng
        self._items: List[bytes] = []

    def push_many(self, items: Sequence[bytes]) -> List[bytes]:
        """Adds `items` in order; returns the earlier items they displaced, in that order.

        Until the buffer is full an item just joins it; after that each one
        takes the place of a uniformly drawn item, which leaves the buffer.
        """
        room = self._capacity - len(self._items)
        if room > 0:
            self._items.extend(items[:room])
            items = items[room:]
        held, capacity, draw = self._items, self._capacity, self._rng.random
        out = []
        for item in items:
            i = int(draw() * capacity)
            out.append(held[i])
            held[i] = item
        return out

    def drain(self) -> Iterator[bytes]:
        """Yields the remaining items in random order, emptying the buffer."""
        items, self._items = self._items, []
        self._rng.shuffle(items)
        yield from items


class BalancedShardAssigner:
    """Picks a shard per record: each block of N records covers all N shards once."""

    def __init__(self, num_shards: int, rng: random.Random):
        self._num_shards = num_shards
        self._rng = np.random.default_rng(rng.getrandbits(64))
        self._left = np.empty(0, np.int64)  # the rest of the current block

    def next_shards(self, count: int) -> np.ndarray:
        """The shards of the next `count` records."""
        n = self._num_shards
        blocks = -(-max(0, count - len(self._left)) // n)
        fresh = np.argsort(self._rng.random((blocks, n)), axis=1).ravel()
        shards = np.concatenate([self._left, fresh])
        self._left = shards[count:]
        return shards[:count]


class SplitWriter:
    """Writes the records of one split into `num_shards` TFRecord files under `root`.

    Use as a context manager; `finish()` closes the files and returns the
    split's `SplitInfo`. On an exception the files are closed and left for the
    caller to delete with the rest of its temporary directory.
    """

    def __init__(self, root: str, split: str, num_shards: int, *, compression: Optional[str],
                 seed: int, shuffle_buffer_size: int, log: Callable[[str], None] = print):
        rng = random.Random(f"kfdist.shard_dataset:{seed}:{split}")
        self._log = log
        self._buffer = ShuffleBuffer(shuffle_buffer_size, rng)
        self._assigner = BalancedShardAssigner(num_shards, rng)
        self._paths = [shard_relpath(split, i, num_shards, compression) for i in range(num_shards)]
        self._counts = [0] * num_shards
        os.makedirs(os.path.join(root, split), exist_ok=True)
        self._writers = [TFRecordFileWriter(os.path.join(root, p), compression)
                         for p in self._paths]

    def __enter__(self) -> "SplitWriter":
        return self

    def __exit__(self, *exc) -> None:
        self._close_files()

    def write(self, records: Sequence[bytes]) -> None:
        """Adds serialized examples of this split (they are shuffled on the way)."""
        self._write_many(self._buffer.push_many(records))

    def _write_many(self, records: List[bytes]) -> None:
        """Writes records that left the shuffle buffer, each to the shard the assigner picks."""
        if not records:
            return
        shards = self._assigner.next_shards(len(records))
        for shard in np.unique(shards):
            picked = [records[i] for i in np.flatnonzero(shards == shard)]
            self._writers[shard].write_many(picked)
            self._counts[shard] += len(picked)

    def _close_files(self) -> None:
        for w in self._writers:
            w.close()

    def finish(self) -> SplitInfo:
        """Flushes the shuffle buffer, closes every shard and describes them."""
        self._write_many(list(self._buffer.drain()))
        self._close_files()
        shards = []
        for rel, count, writer in zip(self._paths, self._counts, self._writers):
            shards.append(ShardInfo(path=rel, num_examples=count, sha256=writer.sha256,
                                    num_bytes=writer.num_bytes))
            self._log(f"wrote {rel}: {count:,} examples, {writer.num_bytes:,} bytes")
        return SplitInfo(num_examples=sum(self._counts), shards=tuple(shards))
