"""The OpenAPI v2 document in gnostic's protobuf encoding, which kubectl before 1.27 asks for.

kubectl (and client-go's discovery) fetch `/openapi/v2` with `Accept:
application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and decode the body as gnostic's
`openapi.v2.Document` message, with no JSON fallback. Only what kubectl reads is encoded: the
document's version and info, and `definitions` (schemas, their vendor extensions and values as
`Any{yaml}`). The field numbers are those of gnostic's `openapiv2/OpenAPIv2.proto`. Writing the
wire format by hand (varints and length-delimited fields) spares a generated module for a
message tree of which a dozen fields are used.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["encode_document"]

_VARINT, _FIXED64, _BYTES = 0, 1, 2

# Schema's fields (openapi.v2.Schema).
_REF, _FORMAT, _TITLE, _DESCRIPTION, _DEFAULT = 1, 2, 3, 4, 5
_NUMBERS = {"maximum": 7, "minimum": 9}
_FLAGS = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16, "readOnly": 27}
_COUNTS = {"maxLength": 11, "minLength": 12, "maxItems": 14, "minItems": 15, "maxProperties": 17, "minProperties": 18}
_PATTERN, _REQUIRED, _ENUM, _ADDITIONAL, _TYPE, _ITEMS, _ALL_OF, _PROPERTIES, _EXAMPLE, _VENDOR = (
    13,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    30,
    31,
)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten-byte two's complement varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes(number: int, payload: bytes) -> bytes:
    return _key(number, _BYTES) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode()) if text else b""


def _any(number: int, value: Any) -> bytes:
    """`openapi.v2.Any{yaml}`: JSON is YAML, and kubectl reads it with a YAML decoder."""
    return _bytes(number, _string(2, json.dumps(value, separators=(",", ":"))))


def _named(number: int, name: str, payload: bytes) -> bytes:
    return _bytes(number, _string(1, name) + _bytes(2, payload))


def _schema(node: Mapping[str, Any]) -> bytes:
    out = bytearray()
    out += _string(_REF, str(node.get("$ref", "")))
    out += _string(_FORMAT, str(node.get("format", "")))
    out += _string(_TITLE, str(node.get("title", "")))
    out += _string(_DESCRIPTION, str(node.get("description", "")))
    if "default" in node:
        out += _any(_DEFAULT, node["default"])
    for name, number in _NUMBERS.items():
        if isinstance(node.get(name), int | float) and not isinstance(node.get(name), bool):
            out += _key(number, _FIXED64) + struct.pack("<d", float(node[name]))
    for name, number in _FLAGS.items():
        if node.get(name) is True:
            out += _key(number, _VARINT) + _varint(1)
    for name, number in _COUNTS.items():
        if isinstance(node.get(name), int) and not isinstance(node.get(name), bool):
            out += _key(number, _VARINT) + _varint(node[name])
    out += _string(_PATTERN, str(node.get("pattern", "")))
    for required in node.get("required") or ():
        out += _bytes(_REQUIRED, str(required).encode())
    for value in node.get("enum") or ():
        out += _any(_ENUM, value)
    extra = node.get("additionalProperties")
    if isinstance(extra, bool):
        out += _bytes(_ADDITIONAL, _key(2, _VARINT) + _varint(int(extra)))
    elif isinstance(extra, Mapping):
        out += _bytes(_ADDITIONAL, _bytes(1, _schema(extra)))
    kind = node.get("type")
    if kind:
        types = kind if isinstance(kind, list) else [kind]
        out += _bytes(_TYPE, b"".join(_string(1, str(t)) for t in types))
    items = node.get("items")
    if isinstance(items, Mapping):
        out += _bytes(_ITEMS, _bytes(1, _schema(items)))
    for sub in node.get("allOf") or ():
        out += _bytes(_ALL_OF, _schema(sub))
    properties = node.get("properties")
    if isinstance(properties, Mapping) and properties:
        out += _bytes(_PROPERTIES, b"".join(_named(1, n, _schema(s)) for n, s in properties.items()))
    if "example" in node:
        out += _any(_EXAMPLE, node["example"])
    for name, value in node.items():
        if name.startswith("x-"):
            out += _named(_VENDOR, name, _string(2, json.dumps(value, separators=(",", ":"))))
    return bytes(out)


def encode_document(title: str, version: str, definitions: Mapping[str, Mapping[str, Any]]) -> bytes:
    """An `openapi.v2.Document` with `definitions` (and empty paths)."""
    info = _string(1, title) + _string(2, version)
    named: Iterable[bytes] = (_named(1, name, _schema(schema)) for name, schema in definitions.items())
    return _string(1, "2.0") + _bytes(2, info) + _bytes(8, b"") + _bytes(9, b"".join(named))
