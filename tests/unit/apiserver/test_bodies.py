"""Request bodies: what decodes, and the clear 4xx for everything a client can get wrong."""

import asyncio

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
        (b"a: &x b\nc: *x\n", "application/yaml", 400, "aliases are not allowed (line 2)"),
        (b"a:\n" + b"- x\n" * (bodies.MAX_YAML_NODES + 1), "application/yaml", 413, "more than 100000 nodes"),
        (b"a: " + b"[" * 101 + b"]" * 101, "application/yaml", 400, "nested too deeply"),
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
        "yaml-scalar-alias",
        "yaml-too-many-nodes",
        "yaml-too-deep",
    ],
)
def test_bad_bodies_are_4xx(data: bytes, content_type: str, code: int, text: str) -> None:
    with pytest.raises(StatusError) as e:
        bodies.decode(data, content_type)
    assert e.value.code == code
    assert text in e.value.message
    status = e.value.to_status()
    assert status["kind"] == "Status" and status["code"] == code


def test_yaml_written_as_json_decodes_as_yaml_would() -> None:
    """kubectl's server-side apply sends JSON as application/apply-patch+yaml: the JSON decoder
    takes it, with YAML's integral floats made integers as kube's YAML-to-JSON conversion does."""
    doc = b'{"spec": {"replicas": 3.0, "ratio": 0.5, "when": "2024-01-02"}}'
    decoded = bodies.decode(doc, "application/apply-patch+yaml")
    assert decoded == {"spec": {"replicas": 3, "ratio": 0.5, "when": "2024-01-02"}}
    assert type(decoded["spec"]["replicas"]) is int
    assert bodies.decode(b"[a, b]", "application/yaml") == ["a", "b"], "flow YAML that is not JSON"


def test_the_yaml_worker_is_shared_by_identity_in_turn() -> None:
    """One client's pile of large YAML bodies does not keep another's single body waiting behind it."""

    async def scenario() -> list[str]:
        decoder = bodies.BodyDecoder()
        order: list[str] = []
        await decoder._turn("mallory")  # the worker is busy with mallory's first body

        async def body(flow: str, tag: str) -> None:
            await decoder._turn(flow)
            order.append(tag)
            await asyncio.sleep(0)
            decoder._next()

        tasks = [asyncio.create_task(body("mallory", f"m{i}")) for i in range(3)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(body("alice", "a")))
        await asyncio.sleep(0)
        decoder._next()  # mallory's first body is done
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["m0", "a", "m1", "m2"]
