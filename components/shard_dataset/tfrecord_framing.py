"""TFRecord files written without TensorFlow.

A TFRecord file is a sequence of records, each framed as

    uint64 length (little endian) | uint32 masked CRC-32C of the length
    | the record's bytes | uint32 masked CRC-32C of the record

(`tensorflow/core/lib/io/record_writer.cc`); a `GZIP` file is that stream
gzipped. Writing the framing here keeps TensorFlow (about 5 s to import) out
of the shard step, and lets the writer hash the bytes as it writes them
instead of reading every shard back.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import struct
from typing import BinaryIO, Iterable, Optional, Sequence

import google_crc32c

_MASK_DELTA = 0xA282EAD8
_UINT32 = 0xFFFFFFFF
#: zlib level of TensorFlow's GZIP record writer (`Z_DEFAULT_COMPRESSION`).
GZIP_LEVEL = 6


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of `data`."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _UINT32


@functools.lru_cache(maxsize=4096)
def _header(length: int) -> bytes:
    """A record's length and its masked CRC (records of a dataset share a few lengths)."""
    packed = struct.pack("<Q", length)
    return packed + struct.pack("<I", masked_crc32c(packed))


def frame(record: bytes) -> bytes:
    """One record with its TFRecord framing."""
    return b"".join((_header(len(record)), record, struct.pack("<I", masked_crc32c(record))))


def frame_all(records: Iterable[bytes]) -> bytes:
    """Records framed one after the other (the bytes of an uncompressed TFRecord file)."""
    return b"".join(frame(record) for record in records)


class _HashingFile:
    """A write-only file that hashes and counts what passes through it."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.num_bytes = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.num_bytes += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


class TFRecordFileWriter:
    """Writes records to one TFRecord file, hashing the file's bytes as they are written.

    Args:
      path: A local file to create.
      compression: None or `GZIP` (gzip with mtime 0, so equal records give
        equal files).
    """

    def __init__(self, path: str, compression: Optional[str] = None):
        self._raw = open(path, "wb")
        self._hashing = _HashingFile(self._raw)
        self._out = (gzip.GzipFile(fileobj=self._hashing, mode="wb", mtime=0,
                                   compresslevel=GZIP_LEVEL, filename="")
                     if compression == "GZIP" else self._hashing)
        self._pending = []
        self._pending_bytes = 0

    def write(self, record: bytes) -> None:
        """Appends one record (buffered; written in blocks of about 1 MiB)."""
        self.write_many((record,))

    def write_many(self, records: Sequence[bytes]) -> None:
        """Appends records in order (buffered; written in blocks of about 1 MiB)."""
        self._pending.append(frame_all(records))
        self._pending_bytes += sum(map(len, records)) + 16 * len(records)
        if self._pending_bytes >= 1 << 20:
            self._flush_pending()

    def _flush_pending(self) -> None:
        if self._pending:
            self._out.write(b"".join(self._pending))
        self._pending, self._pending_bytes = [], 0

    def close(self) -> None:
        """Writes what is buffered and closes the file (idempotent)."""
        if self._raw.closed:
            return
        try:
            self._flush_pending()
            if self._out is not self._hashing:
                self._out.close()
        finally:
            self._raw.close()

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the file's bytes (complete once closed)."""
        return self._hashing.sha256.hexdigest()

    @property
    def num_bytes(self) -> int:
        """Size of the file in bytes (complete once closed)."""
        return self._hashing.num_bytes
