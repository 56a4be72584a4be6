"""Fast serialization of canonical `tf.train.Example`s.

A canonical example has two map entries, the input feature and the
`label`, an int64 class id or a regression's float32 number (and, for
tables with string columns, a `categorical` bytes_list written per example). Every example of a dataset has the same input size, so everything
but the input bytes and the label is the same: the encoder precomputes the
protobuf framing once per label value and writes each record as
`head[label] + input bytes + tail[label]`. The bytes are exactly those of
`tf.train.Example.SerializeToString(deterministic=True)` (map keys sorted),
which the tests check, at a fraction of the cost of building protos.
"""

from __future__ import annotations

import functools
import itertools
import struct
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from kfdist.components.common.dataset_spec import CATEGORICAL_KEY, IMAGE_KEY, LABEL_KEY

# Field numbers of tensorflow/core/example/{example,feature}.proto.
_EXAMPLE_FEATURES = 1      # Example.features
_FEATURES_MAP = 1          # Features.feature (map<string, Feature>)
_MAP_KEY, _MAP_VALUE = 1, 2
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3   # Feature.kind oneof
_LIST_VALUE = 1            # {Bytes,Float,Int64}List.value (numeric ones packed)
#: Framings of examples with strings kept for reuse (distinct combinations of a table's strings
#: and label).
_MAX_CACHED_STRINGS = 65_536


@functools.lru_cache(maxsize=1 << 14)
def _varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer (kept: an example's tags and sizes
    repeat, and a row of distinct strings needs a dozen)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field: int, payload_size: int) -> bytes:
    """Tag and length of a length-delimited field whose payload follows."""
    return _varint(field << 3 | 2) + _varint(payload_size)


def _offsets(count: int, size: int) -> Iterable[int]:
    """Where each of `count` inputs of `size` bytes starts in their joined bytes."""
    return range(0, count * size, size) if size else itertools.repeat(0, count)


@functools.lru_cache(maxsize=None)
def _key_field(key: str) -> bytes:
    """The key field of a `Features.feature` map entry."""
    key_bytes = key.encode()
    return _length_delimited(_MAP_KEY, len(key_bytes)) + key_bytes


def _map_entry_prefix(key: str, feature_size: int) -> bytes:
    """Bytes of a `Features.feature` map entry up to its Feature's payload."""
    key_field = _key_field(key)
    value_tag = _length_delimited(_MAP_VALUE, feature_size)
    entry_size = len(key_field) + len(value_tag) + feature_size
    return _length_delimited(_FEATURES_MAP, entry_size) + key_field + value_tag


class CanonicalExampleEncoder:
    """Serializes `(input, label)` pairs of one feature layout as canonical Examples.

    Args:
      feature_key: `image` (input stored as one bytes value) or `features`
        (input stored as a packed float_list).
      input_bytes: Size of one input in bytes (pixels, or 4 × number of floats).
    """

    def __init__(self, feature_key: str, input_bytes: int):
        self._feature_key = feature_key
        self._input_bytes = input_bytes
        kind = _BYTES_LIST if feature_key == IMAGE_KEY else _FLOAT_LIST
        # Protobuf writes no packed field at all for an empty list (a table of strings only).
        list_prefix = _length_delimited(_LIST_VALUE, input_bytes) if input_bytes else b""
        feature_prefix = _length_delimited(kind, len(list_prefix) + input_bytes) + list_prefix
        feature_size = len(feature_prefix) + input_bytes
        self._input_entry_prefix = _map_entry_prefix(feature_key, feature_size) + feature_prefix
        self._input_entry_size = len(self._input_entry_prefix) + input_bytes
        self._framing: Dict[int, Tuple[bytes, bytes]] = {}
        self._strings: Dict[Tuple[tuple, int], Tuple[bytes, bytes]] = {}
        self._pieces: Dict[object, bytes] = {}

    def _label_entry(self, label: Union[int, float]) -> bytes:
        """The label's map entry: an int64_list for a class id, a float_list for a number."""
        if isinstance(label, float):
            value, kind = struct.pack("<f", label), _FLOAT_LIST
        else:
            value, kind = _varint(label), _INT64_LIST
        values = _length_delimited(_LIST_VALUE, len(value)) + value
        feature = _length_delimited(kind, len(values)) + values
        return _map_entry_prefix(LABEL_KEY, len(feature)) + feature

    def framing(self, label: Union[int, float]) -> Tuple[bytes, bytes]:
        """`(head, tail)` around the input bytes of an example with `label` (cached; a
        regression's labels are many: the cache is emptied when it is full)."""
        if label not in self._framing:
            if len(self._framing) >= _MAX_CACHED_STRINGS:
                self._framing.clear()
            label_entry = self._label_entry(label)
            features_size = self._input_entry_size + len(label_entry)
            example_head = _length_delimited(_EXAMPLE_FEATURES, features_size)
            if self._feature_key < LABEL_KEY:   # deterministic order: keys sorted
                head, tail = example_head + self._input_entry_prefix, label_entry
            else:
                head = example_head + label_entry + self._input_entry_prefix
                tail = b""
            self._framing[label] = (head, tail)
        return self._framing[label]

    @classmethod
    def for_feature(cls, feature) -> "CanonicalExampleEncoder":
        """The encoder of a source's `FeatureSpec` (uint8 images or float32 vectors)."""
        item_bytes = 1 if feature.dtype == "uint8" else 4
        return cls(feature.key, item_bytes * int(np.prod(feature.shape)))

    def encode_split(self, batch, mask: np.ndarray) -> List[bytes]:
        """Serializes the examples of a source batch that `mask` selects (one split's)."""
        strings = batch.categorical[mask] if batch.categorical is not None else None
        return self.encode(batch.inputs[mask], batch.labels[mask], strings)

    def encode(self, inputs: np.ndarray, labels: np.ndarray,
               categorical: Optional[np.ndarray] = None) -> List[bytes]:
        """Serializes a block of examples.

        Args:
          inputs: `[B, ...]` uint8 images or float feature vectors (cast to
            little-endian float32).
          labels: `[B]` non-negative class ids, or a regression's float numbers.
          categorical: For tables with string columns, their values: `str`
            `[B, K]` (a `features` encoder only).

        Returns:
          One serialized `tf.train.Example` per row.
        """
        if self._feature_key != IMAGE_KEY:
            inputs = inputs.astype("<f4", copy=False)
        raw = np.ascontiguousarray(inputs).tobytes()
        size = self._input_bytes
        if len(raw) != size * len(labels):
            raise ValueError(f"inputs hold {len(raw)} bytes for {len(labels)} examples; "
                             f"expected {size} bytes each")
        if categorical is not None:
            return self._encode_with_strings(raw, labels, categorical)
        label_list = labels.tolist()
        framings = {label: self.framing(label) for label in set(label_list)}
        return [head + raw[start:start + size] + tail for start, (head, tail) in zip(
            _offsets(len(labels), size), map(framings.__getitem__, label_list))]

    def _string_framing(self, values: tuple, label: int) -> Tuple[bytes, bytes]:
        """`(head, tail)` around the input bytes of an example with `categorical` values
        `values` and `label`: the `categorical` entry sorts before `features` and `label`."""
        pieces = self._pieces
        if len(pieces) >= _MAX_CACHED_STRINGS:
            pieces.clear()
        payload = b"".join([pieces.get(value) or self._piece(value) for value in values])
        feature = _length_delimited(_BYTES_LIST, len(payload)) + payload
        strings = _map_entry_prefix(CATEGORICAL_KEY, len(feature)) + feature
        label_entry = self.framing(label)[1]
        features_size = len(strings) + self._input_entry_size + len(label_entry)
        head = (_length_delimited(_EXAMPLE_FEATURES, features_size) + strings
                + self._input_entry_prefix)
        if len(self._strings) >= _MAX_CACHED_STRINGS:
            self._strings.clear()
        self._strings[values, label] = head, label_entry
        return head, label_entry

    def _piece(self, value) -> bytes:
        """One string's `BytesList.value` field (kept: a column repeats its values)."""
        data = str(value).encode()
        piece = self._pieces[value] = _length_delimited(_LIST_VALUE, len(data)) + data
        return piece

    def _encode_with_strings(self, raw: bytes, labels: np.ndarray,
                             categorical: np.ndarray) -> List[bytes]:
        """Examples with a `categorical` entry (tables repeat their categories: the framing
        of each combination of values and label is built once)."""
        size, cache, out = self._input_bytes, self._strings, []
        for start, key in zip(_offsets(len(labels), size),
                              zip(map(tuple, categorical.tolist()), labels.tolist())):
            framing = cache.get(key) or self._string_framing(*key)
            out.append(framing[0] + raw[start:start + size] + framing[1])
        return out
