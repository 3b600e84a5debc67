"""Protobuf request bodies (apiserver/protobuf.py): what client-go's typed clients send decodes to
what the same object sent as JSON would; everything else is a clear 400 or 415.

The bytes are built field by field here with protobuf's wire rules (the field numbers of the kinds'
generated.proto); tests/integration/deploy/test_install.py checks the same path with real Helm.
"""

from __future__ import annotations

import pytest

from apiserver import bodies, protobuf
from apiserver.errors import StatusError


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return field(number, field(1, key) + field(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def decode(data: bytes) -> object:
    return bodies.decode(data, protobuf.CONTENT_TYPE)


def test_a_secret_as_helm_writes_it() -> None:
    meta = (
        field(1, "sh.helm.release.v1.tessera.v1")
        + field(3, "tessera-system")
        + field(8, b"")  # the zero creationTimestamp: Go writes the field, empty
        + entry(11, "owner", "helm")
        + entry(11, "version", "1")
        + field(14, "a")
        + field(14, "b")
    )
    body = envelope(
        "v1", "Secret", field(1, meta) + entry(2, "release", b"\x00\xffpayload") + field(3, "helm.sh/release.v1")
    )
    assert decode(body) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "sh.helm.release.v1.tessera.v1",
            "namespace": "tessera-system",
            "labels": {"owner": "helm", "version": "1"},
            "finalizers": ["a", "b"],
        },
        "data": {"release": "AP9wYXlsb2Fk"},
        "type": "helm.sh/release.v1",
    }


def test_zero_values_are_dropped_unless_the_go_field_is_a_pointer() -> None:
    # generation 0 and "" are omitempty in JSON; immutable: false was set on purpose.
    meta = field(1, "c") + field(2, "") + field(7, 0)
    body = envelope("v1", "ConfigMap", field(1, meta) + entry(2, "k", "v") + field(4, 0))
    assert decode(body) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"k": "v"},
        "immutable": False,
    }


def test_delete_options_keep_orphan_false_and_negative_numbers() -> None:
    options = field(1, -1) + field(2, field(1, "uid-1")) + field(3, 0) + field(5, "All")
    assert decode(envelope("meta.k8s.io/v1", "DeleteOptions", options)) == {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": -1,
        "preconditions": {"uid": "uid-1"},
        "orphanDependents": False,
        "dryRun": ["All"],
    }


def test_times_owner_references_and_unknown_fields() -> None:
    owner = field(5, "apps/v1") + field(1, "ReplicaSet") + field(3, "rs") + field(4, "u") + field(6, 1)
    stamp = field(1, 1_700_000_000) + field(2, 5)
    meta = field(1, "ns") + field(8, stamp) + field(13, owner) + field(99, "from a newer client")
    fixed = varint(15 << 3 | 1) + b"\x00" * 8  # a fixed64 field this server does not know: skipped
    body = envelope("v1", "Namespace", field(1, meta) + field(3, field(1, "Active")) + fixed)
    assert decode(body) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "ns",
            "creationTimestamp": "2023-11-14T22:13:20Z",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
            ],
        },
        "status": {"phase": "Active"},
    }


def test_a_kind_taken_only_as_json_is_a_415_naming_the_kinds_taken() -> None:
    with pytest.raises(StatusError) as e:
        decode(envelope("apps/v1", "Deployment", field(1, field(1, "d"))))
    assert e.value.code == 415
    assert "apps/v1/Deployment" in e.value.message and "ConfigMap, DeleteOptions, Namespace, Secret" in e.value.message


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"\x0a\x02{}", "prefix"),
        (b"k8s\x00\x0a\x05\x0a\x02v1", "runs past the end"),
        (b"k8s\x00\x0a", "truncated varint"),
        (b"k8s\x00" + b"\x0b", "wire type 3"),
        (envelope("v1", "Secret", field(1, field(1, b"\xff\xfe"))), "can't decode"),
        (envelope("v1", "Secret", field(1, 7)), "a number where a length-delimited value belongs"),
        (envelope("v1", "Secret", field(1, field(8, field(1, 1 << 62)))), "out of range"),
    ],
    ids=[
        "no-prefix",
        "truncated-field",
        "truncated-varint",
        "group-wire-type",
        "bad-utf8",
        "wrong-wire-type",
        "bad-time",
    ],
)
def test_malformed_bytes_are_a_400(data: bytes, text: str) -> None:
    with pytest.raises(StatusError) as e:
        decode(data)
    assert e.value.code == 400
    assert text in e.value.message
