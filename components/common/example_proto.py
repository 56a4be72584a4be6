"""`tf.train.Example` as a protobuf message class, without TensorFlow.

The messages of TensorFlow's `example.proto` and `feature.proto` (`Example`,
`Features`, `Feature`, `BytesList`, `FloatList`, `Int64List`), declared here
with protobuf's descriptor API under the same names and field numbers, hence
the same wire format. A step that reads a few features of a dataset's records
(the evaluation's slices) parses them with this class instead of importing
TensorFlow (5 s and 600 MB for 20 lines). The descriptors live in a pool of
their own, so they never clash with TensorFlow's when both are loaded.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_FIELD = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tensorflow"


def _message(file, name: str, fields, oneof: str = "") -> descriptor_pb2.DescriptorProto:
    """Adds message `name` with `(field name, number, type, repeated, message type)` fields."""
    message = file.message_type.add(name=name)
    if oneof:
        message.oneof_decl.add(name=oneof)
    for field_name, number, kind, repeated, type_name in fields:
        field = message.field.add(name=field_name, number=number, type=kind,
                                  label=_FIELD.LABEL_REPEATED if repeated else _FIELD.LABEL_OPTIONAL)
        if type_name:
            field.type_name = f".{_PACKAGE}.{type_name}"
        if oneof:
            field.oneof_index = 0
    return message


def _example_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="kfdist/tf_example.proto", package=_PACKAGE,
                                              syntax="proto3")
    _message(file, "BytesList", [("value", 1, _FIELD.TYPE_BYTES, True, "")])
    _message(file, "FloatList", [("value", 1, _FIELD.TYPE_FLOAT, True, "")])
    _message(file, "Int64List", [("value", 1, _FIELD.TYPE_INT64, True, "")])
    _message(file, "Feature", [("bytes_list", 1, _FIELD.TYPE_MESSAGE, False, "BytesList"),
                               ("float_list", 2, _FIELD.TYPE_MESSAGE, False, "FloatList"),
                               ("int64_list", 3, _FIELD.TYPE_MESSAGE, False, "Int64List")],
             oneof="kind")
    features = _message(file, "Features", [
        ("feature", 1, _FIELD.TYPE_MESSAGE, True, "Features.FeatureEntry")])
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_FIELD.TYPE_STRING, label=_FIELD.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_FIELD.TYPE_MESSAGE,
                    label=_FIELD.LABEL_OPTIONAL, type_name=f".{_PACKAGE}.Feature")
    _message(file, "Example", [("features", 1, _FIELD.TYPE_MESSAGE, False, "Features")])
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_example_file())
#: The `tensorflow.Example` message class: `Example.FromString(record)`.
Example = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.Example"))
