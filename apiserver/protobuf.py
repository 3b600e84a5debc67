"""Request bodies in Kubernetes' protobuf encoding, for the kinds client-go insists on sending so.

Why this exists: client-go's generated clients for built-in kinds (since 1.32, generated with
`--prefers-protobuf`) send their bodies as `application/vnd.kubernetes.protobuf` whenever the
program's rest.Config leaves ContentType unset, and a 415 makes client-go fall back to JSON only
for CBOR, never for protobuf. Helm's default release storage (its Secret driver, and its
ConfigMap driver) is such a client: against a JSON-only server every `helm install` fails. So
the server decodes protobuf for the kinds those clients write — Secret, ConfigMap, Namespace
(`helm install --create-namespace`) — and for the DeleteOptions body of their deletes; any other
kind in protobuf is answered 415 with the kinds that are accepted. Answers stay JSON: those
clients accept `application/vnd.kubernetes.protobuf,application/json` and decode by the answer's
Content-Type.

The wire format (facts from apimachinery's runtime/serializer/protobuf and the kinds'
generated.proto): the 4 bytes `k8s\\0`, then a `runtime.Unknown` message whose `typeMeta` names
apiVersion and kind and whose `raw` is the object's own message. Each message here is a table of
field number → (JSON name, type). A Go pointer field (`presence`) keeps its value when it is the
zero value (`immutable: false`, `orphanDependents: false` mean something); any other field's zero
value is left out, as Go's JSON encoder leaves it out with `omitempty` — so the dict is what the
same object sent as JSON would decode to. Unknown field numbers are skipped, as protobuf does.
Pure: bytes in, a JSON-shaped dict out; called by `bodies.decode`.
"""

from __future__ import annotations

import base64
import datetime
import json
from dataclasses import dataclass
from typing import Any, Final

from apiserver.errors import StatusError

__all__ = ["ACCEPTED_KINDS", "CONTENT_TYPE", "decode"]

CONTENT_TYPE: Final = "application/vnd.kubernetes.protobuf"
_MAGIC: Final = b"k8s\x00"
_MAX_DEPTH: Final = 32

# Field types: scalars, a nested message, maps of string to string or bytes, and metav1.Time.
_STRING, _BYTES, _INT, _BOOL, _MESSAGE, _MAP_STRING, _MAP_BYTES, _TIME = range(8)


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    type: int
    message: tuple[tuple[int, _Field], ...] = ()
    repeated: bool = False
    #: A Go pointer: its zero value is kept (present), not dropped as omitempty would.
    presence: bool = False


_Message = tuple[tuple[int, _Field], ...]


def _s(name: str, *, presence: bool = False) -> _Field:
    return _Field(name, _STRING, presence=presence)


_OWNER_REFERENCE: Final[_Message] = (
    (1, _s("kind")),
    (3, _s("name")),
    (4, _s("uid")),
    (5, _s("apiVersion")),
    (6, _Field("controller", _BOOL, presence=True)),
    (7, _Field("blockOwnerDeletion", _BOOL, presence=True)),
)
_MANAGED_FIELDS_ENTRY: Final[_Message] = (
    (1, _s("manager")),
    (2, _s("operation")),
    (3, _s("apiVersion")),
    (4, _Field("time", _TIME)),
    (6, _s("fieldsType")),
    (7, _Field("fieldsV1", _MESSAGE, ((1, _Field("Raw", _BYTES)),))),  # see _fields_v1
    (8, _s("subresource")),
)
_OBJECT_META: Final[_Message] = (
    (1, _s("name")),
    (2, _s("generateName")),
    (3, _s("namespace")),
    (4, _s("selfLink")),
    (5, _s("uid")),
    (6, _s("resourceVersion")),
    (7, _Field("generation", _INT)),
    (8, _Field("creationTimestamp", _TIME)),
    (9, _Field("deletionTimestamp", _TIME)),
    (10, _Field("deletionGracePeriodSeconds", _INT, presence=True)),
    (11, _Field("labels", _MAP_STRING)),
    (12, _Field("annotations", _MAP_STRING)),
    (13, _Field("ownerReferences", _MESSAGE, _OWNER_REFERENCE, repeated=True)),
    (14, _Field("finalizers", _STRING, repeated=True)),
    (17, _Field("managedFields", _MESSAGE, _MANAGED_FIELDS_ENTRY, repeated=True)),
)
_METADATA: Final = (1, _Field("metadata", _MESSAGE, _OBJECT_META))
_NAMESPACE_CONDITION: Final[_Message] = (
    (1, _s("type")),
    (2, _s("status")),
    (4, _Field("lastTransitionTime", _TIME)),
    (5, _s("reason")),
    (6, _s("message")),
)

#: (apiVersion, kind) -> the object's message.
_KINDS: Final[dict[tuple[str, str], _Message]] = {
    ("v1", "Secret"): (
        _METADATA,
        (2, _Field("data", _MAP_BYTES)),
        (3, _s("type")),
        (4, _Field("stringData", _MAP_STRING)),
        (5, _Field("immutable", _BOOL, presence=True)),
    ),
    ("v1", "ConfigMap"): (
        _METADATA,
        (2, _Field("data", _MAP_STRING)),
        (3, _Field("binaryData", _MAP_BYTES)),
        (4, _Field("immutable", _BOOL, presence=True)),
    ),
    ("v1", "Namespace"): (
        _METADATA,
        (2, _Field("spec", _MESSAGE, ((1, _Field("finalizers", _STRING, repeated=True)),))),
        (
            3,
            _Field(
                "status",
                _MESSAGE,
                ((1, _s("phase")), (2, _Field("conditions", _MESSAGE, _NAMESPACE_CONDITION, repeated=True))),
            ),
        ),
    ),
}
_DELETE_OPTIONS: Final[_Message] = (
    (1, _Field("gracePeriodSeconds", _INT, presence=True)),
    (
        2,
        _Field(
            "preconditions",
            _MESSAGE,
            ((1, _s("uid", presence=True)), (2, _s("resourceVersion", presence=True))),
            presence=True,
        ),
    ),
    (3, _Field("orphanDependents", _BOOL, presence=True)),
    (4, _s("propagationPolicy", presence=True)),
    (5, _Field("dryRun", _STRING, repeated=True)),
    (6, _Field("ignoreStoreReadErrorWithClusterBreakingPotential", _BOOL, presence=True)),
)
# DeleteOptions travels under any of the versions a client's scheme registers it in.
for _version in ("v1", "meta.k8s.io/v1"):
    _KINDS[(_version, "DeleteOptions")] = _DELETE_OPTIONS

#: What a client may send in protobuf, for the 415's message.
ACCEPTED_KINDS: Final = tuple(sorted({kind for _, kind in _KINDS}))


_ZERO: Final[tuple[object, ...]] = ("", 0, False, None, {}, [])


class _Malformed(ValueError):
    pass


def decode(data: bytes) -> dict[str, Any]:
    """The object a protobuf body holds, as its JSON would decode. Raises StatusError: 400 for
    malformed bytes, 415 for a kind this server takes only as JSON."""
    if not data.startswith(_MAGIC):
        raise StatusError.bad_request(
            "the body is not valid protobuf: it does not start with Kubernetes' prefix k8s\\0"
        )
    try:
        unknown = _fields(data[len(_MAGIC) :])
        type_meta = _fields(_only(unknown, 1, b""))
        api_version = _only(type_meta, 1, b"").decode()
        kind = _only(type_meta, 2, b"").decode()
        encoding = _only(unknown, 3, b"").decode()
        schema = _KINDS.get((api_version, kind))
        if schema is None or encoding:
            raise StatusError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - {CONTENT_TYPE} of {api_version}/{kind}: "
                f"this server takes protobuf only for {', '.join(ACCEPTED_KINDS)}; send JSON",
            )
        obj = _message(_only(unknown, 2, b""), schema, 0)
    except (_Malformed, UnicodeDecodeError) as e:
        raise StatusError.bad_request(f"the body is not valid protobuf: {e}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise _Malformed("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """A message's (field number, value) pairs in order: varints as ints, length-delimited as bytes
    (fixed-width values are skipped: no kind here has one)."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise _Malformed("field number 0")
        if wire == 0:
            value, at = _varint(data, at)
            out.append((number, value))
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise _Malformed(f"field {number} runs past the end")
            out.append((number, data[at : at + size]))
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
            if at > len(data):
                raise _Malformed(f"field {number} runs past the end")
        else:
            raise _Malformed(f"field {number} has wire type {wire}")
    return out


def _only(fields: list[tuple[int, int | bytes]], number: int, default: bytes) -> bytes:
    """The last length-delimited value of field `number` (protobuf: the last one wins)."""
    value: int | bytes = default
    for n, v in fields:
        if n == number:
            value = v
    if not isinstance(value, bytes):
        raise _Malformed(f"field {number} is a number, not bytes")
    return value


def _message(data: bytes, schema: _Message, depth: int) -> dict[str, Any]:
    if depth > _MAX_DEPTH:
        raise _Malformed("nested too deeply")
    table = dict(schema)
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        field = table.get(number)
        if field is None:
            continue
        value = _value(field, raw, depth)
        if field.repeated:
            out.setdefault(field.name, []).append(value)
        elif field.type in (_MAP_STRING, _MAP_BYTES):
            out.setdefault(field.name, {}).update(value)
        else:
            out[field.name] = value
    # omitempty: a zero value is dropped unless its field is a Go pointer (then it was sent on purpose).
    present = {f.name for f in _schema_fields(schema) if f.presence}
    return {name: value for name, value in out.items() if name in present or value not in _ZERO}


def _schema_fields(schema: _Message) -> list[_Field]:
    return [field for _, field in schema]


def _value(field: _Field, raw: int | bytes, depth: int) -> Any:
    if field.type == _INT:
        number = _int(raw)
        return number - (1 << 64) if number >= 1 << 63 else number
    if field.type == _BOOL:
        return bool(_int(raw))
    data = _bytes(raw)
    if field.type == _STRING:
        return data.decode()
    if field.type == _BYTES:
        return base64.b64encode(data).decode()
    if field.type == _TIME:
        return _time(data)
    if field.type in (_MAP_STRING, _MAP_BYTES):
        entry = _fields(data)
        key = _only(entry, 1, b"").decode()
        value = _only(entry, 2, b"")
        return {key: value.decode() if field.type == _MAP_STRING else base64.b64encode(value).decode()}
    if field.name == "fieldsV1":  # metav1.FieldsV1 is raw JSON in its one field
        return _fields_v1(data)
    return _message(data, field.message, depth + 1)


def _int(raw: int | bytes) -> int:
    if not isinstance(raw, int):
        raise _Malformed("a length-delimited value where a number belongs")
    return raw


def _bytes(raw: int | bytes) -> bytes:
    if not isinstance(raw, bytes):
        raise _Malformed("a number where a length-delimited value belongs")
    return raw


def _time(data: bytes) -> str | None:
    """metav1.Time (seconds, nanos) as its JSON writes it, to the second; the zero time (an empty
    message) is null, as Go writes it."""
    if not data:
        return None
    fields = dict(_fields(data))
    seconds = _int(fields.get(1, 0))
    seconds = seconds - (1 << 64) if seconds >= 1 << 63 else seconds
    try:
        when = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        raise _Malformed(f"time {seconds} is out of range") from None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields_v1(data: bytes) -> Any:
    raw = _only(_fields(data), 1, b"")
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        raise _Malformed("fieldsV1 is not JSON") from None
