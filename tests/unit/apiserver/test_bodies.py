"""Request bodies: what decodes, and the clear 4xx for everything a client can get wrong."""

import pytest

from apiserver import bodies
from apiserver.errors import StatusError


def test_json_and_yaml_decode() -> None:
    assert bodies.decode(b'{"a": [1, 2.5, true, null]}', "application/json") == {"a": [1, 2.5, True, None]}
    assert bodies.decode(b"a: 1\nb: [x]\n", "application/yaml") == {"a": 1, "b": ["x"]}


def test_yaml_integral_floats_are_json_integers_as_through_gos_float64() -> None:
    """kube's YAML-to-JSON conversion writes YAML's 3.0 as 3 (so `replicas: 3.0` decodes in YAML); JSON keeps 3.0."""
    doc = b"replicas: 3.0\nratio: 0.5\nports: [80.0, {containerPort: 8080.0}]\nbig: 1.0e+21\n"
    decoded = bodies.decode(doc, "application/yaml")
    assert decoded == {"replicas": 3, "ratio": 0.5, "ports": [80, {"containerPort": 8080}], "big": 1e21}
    assert type(decoded["replicas"]) is int and type(decoded["big"]) is float
    assert type(bodies.decode(b'{"replicas": 3.0}', "application/json")["replicas"]) is float


def test_yaml_timestamps_stay_strings() -> None:
    assert bodies.decode(b"when: 2024-01-02T03:04:05Z\nday: 2024-01-02\n", "application/yaml") == {
        "when": "2024-01-02T03:04:05Z",
        "day": "2024-01-02",
    }


@pytest.mark.parametrize(
    ("data", "content_type", "code", "text"),
    [
        (b"", "application/json", 400, "empty"),
        (b"{", "application/json", 400, "not valid JSON"),
        (b'{"a": NaN}', "application/json", 400, "not valid JSON"),
        (b"\xff\xfe", "application/json", 400, "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json", 400, "nested too deeply"),
        (b"a: &x [1]\nb: *x\n", "application/yaml", 400, "aliases are not allowed"),
        (b"a: .nan\n", "application/yaml", 400, "NaN"),
        (b"? [a, b]\n: 1\n", "application/yaml", 400, "not valid YAML"),
        (b"a: !!binary aGVsbG8=\n", "application/yaml", 400, "unsupported value"),
        (b"1: a\n", "application/yaml", 400, "keys must be strings"),
        (b"---\na: 1\n---\nb: 2\n", "application/yaml", 400, "not valid YAML"),
        (b"\xa1\x61a\x01", "application/cbor", 415, "unknown format"),
        (b"9" * 5000, "application/json", 400, "not valid JSON"),
    ],
    ids=[
        "empty",
        "truncated",
        "nan",
        "not-utf8",
        "too-deep",
        "yaml-alias",
        "yaml-nan",
        "yaml-complex-key",
        "yaml-binary",
        "yaml-int-key",
        "yaml-multi-doc",
        "protobuf",
        "huge-int",
    ],
)
def test_bad_bodies_are_4xx(data: bytes, content_type: str, code: int, text: str) -> None:
    with pytest.raises(StatusError) as e:
        bodies.decode(data, content_type)
    assert e.value.code == code
    assert text in e.value.message
    status = e.value.to_status()
    assert status["kind"] == "Status" and status["code"] == code
