"""TFRecord files written and read without TensorFlow.

A TFRecord file is a sequence of records, each framed as

    uint64 length (little endian) | uint32 masked CRC-32C of the length
    | the record's bytes | uint32 masked CRC-32C of the record

(`tensorflow/core/lib/io/record_writer.cc`); a `GZIP` file is that stream
gzipped. Writing the framing here keeps TensorFlow (about 5 s to import) out
of the shard step, and lets the writer hash the bytes as it writes them
instead of reading every shard back; reading it here keeps TensorFlow out of
an evaluation that reads a few columns of the eval split (`read_records`,
both CRCs checked as TensorFlow's reader checks them).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import itertools
import struct
import zlib
from typing import BinaryIO, Iterable, Iterator, Optional, Sequence

import google_crc32c

from kfdist.components.common.errors import InvalidInputError

_MASK_DELTA = 0xA282EAD8
_UINT32 = 0xFFFFFFFF
#: zlib settings of TensorFlow's GZIP record writer (`ZlibCompressionOptions::GZIP` in
#: `tensorflow/core/lib/io/zlib_compression_options.h`): the default level, a gzip wrapper
#: (window bits 15 + 16) and memory level 9, which compresses faster than zlib's default 8.
GZIP_LEVEL, GZIP_WINDOW_BITS, GZIP_MEMORY_LEVEL = 6, 15 + 16, 9


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


def read_records(path: str, compression: Optional[str] = None) -> Iterator[bytes]:
    """The records of one TFRecord file, in order, each checked against its CRCs.

    Args:
      path: A local TFRecord file.
      compression: None or `GZIP`.

    Raises:
      InvalidInputError: Naming the file and the record when a record is truncated or its
        length or bytes do not match their CRC.
    """
    with (gzip.open if compression == "GZIP" else open)(path, "rb") as f:
        for index in itertools.count():
            header = f.read(12)
            if not header:
                return
            if len(header) == 12 and struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                raise InvalidInputError(f"the length of record {index} of TFRecord file {path!r} "
                                        "does not match its CRC: the file is corrupted")
            data = f.read(struct.unpack("<Q", header[:8])[0]) if len(header) == 12 else b""
            footer = f.read(4)
            if len(header) < 12 or len(footer) < 4:
                raise InvalidInputError(f"TFRecord file {path!r} ends inside record {index}: "
                                        "the file is truncated")
            if struct.unpack("<I", footer)[0] != masked_crc32c(data):
                raise InvalidInputError(f"record {index} of TFRecord file {path!r} does not "
                                        "match its CRC: the file is corrupted")
            yield data


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


def _gzip_compressor():
    """A zlib compressor of one gzip member with TensorFlow's settings (the header zlib writes:
    no name, mtime 0, so equal input gives equal bytes)."""
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WINDOW_BITS, GZIP_MEMORY_LEVEL)


def gzip_bytes(data: bytes) -> bytes:
    """`data` as the bytes of a `GZIP` TFRecord file (what `TFRecordFileWriter` writes)."""
    compressor = _gzip_compressor()
    return compressor.compress(data) + compressor.flush()


class _GzipStream:
    """Compresses what is written to it into `raw` as one gzip member (`gzip_bytes`)."""

    def __init__(self, raw: _HashingFile):
        self.raw = raw
        self._zlib = _gzip_compressor()

    def write(self, data: bytes) -> None:
        self.raw.write(self._zlib.compress(data))

    def close(self) -> None:
        self.raw.write(self._zlib.flush())


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
        self._out = _GzipStream(self._hashing) if compression == "GZIP" else self._hashing
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
