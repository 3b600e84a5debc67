"""Decoding request bodies (JSON, YAML, or protobuf for a few kinds) without letting a client hurt the server.

Limits enforced here: no NaN/Infinity (they cannot be re-encoded as JSON), no YAML anchors or
aliases (an alias bomb expands exponentially when re-encoded), only JSON's types (YAML timestamps
stay strings, as Kubernetes' YAML-to-JSON conversion keeps them), YAML nested at most
`MAX_DEPTH` levels, and errors that say what is wrong as a 400 instead of a stack trace.

A YAML number passes through a Go float64 in Kubernetes' YAML-to-JSON conversion, which writes
`3.0` as the JSON `3`: so a YAML body's integral floats become integers here, and a built-in
kind's int32 field takes `replicas: 3.0` in YAML (never in JSON, where Go's decoder refuses it).
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from apiserver import protobuf
from apiserver.errors import StatusError

__all__ = ["MAX_DEPTH", "decode"]

MAX_DEPTH = 100
_GO_EXPONENT = 1e21
TOO_DEEP = "the object is nested too deeply"
JSON_TYPES = frozenset({"", "application/json", "*/*"})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml"})


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases and leaves timestamps as strings."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            raise yaml.YAMLError(f"aliases are not allowed (line {event.start_mark.line + 1})")
        return super().compose_node(parent, index)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _integral(node: dict[str, Any] | list[Any]) -> None:
    """YAML's `3.0` as Go's float64 writes it in JSON: `3` (up to 1e21, where Go switches to an exponent)."""
    for key in node if isinstance(node, dict) else range(len(node)):
        value = node[key]  # type: ignore[index]  # a key of this very dict, or an index of this list
        if type(value) is float and value.is_integer() and abs(value) < _GO_EXPONENT:
            node[key] = int(value)  # type: ignore[index]  # likewise


def _check(doc: Any) -> None:
    """A YAML document's depth and types (what json.dumps must be able to write back), and its
    integral floats made integers, as in Kubernetes' YAML-to-JSON conversion."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise StatusError.bad_request(TOO_DEEP)
        if isinstance(node, dict):
            if not all(isinstance(k, str) for k in node):
                raise StatusError.bad_request("object keys must be strings")
            _integral(node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            _integral(node)
            stack.extend((v, depth + 1) for v in node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise StatusError.bad_request("NaN and infinite numbers are not allowed")
        elif node is not None and not isinstance(node, (str, int, float)):
            raise StatusError.bad_request(f"unsupported value of type {type(node).__name__}")


def decode(data: bytes, content_type: str, *, patch_types: frozenset[str] = frozenset()) -> Any:
    """The decoded body; raises a 400 for malformed input and a 415 for an unknown format."""
    if not data.strip():
        raise StatusError.bad_request("the request body is empty")
    if content_type == protobuf.CONTENT_TYPE:
        return protobuf.decode(data)  # the kinds client-go's typed clients send so (protobuf.py)
    try:
        if content_type in JSON_TYPES or content_type in patch_types:
            # JSON yields only JSON types, nested as deep as the decoder's recursion limit allows
            # (code that recurses deeper later raises RecursionError: the handlers answer 400).
            return json.loads(data, parse_constant=_reject_constant)
        if content_type not in YAML_TYPES:
            raise StatusError.unsupported_media_type(content_type)
        doc = yaml.load(data, Loader=_NoAliasLoader)  # a SafeLoader subclass: no arbitrary objects
    except (ValueError, yaml.YAMLError) as e:
        raise StatusError.bad_request(f"the body is not valid {_format(content_type)}: {e}") from None
    except RecursionError:
        raise StatusError.bad_request(TOO_DEEP) from None
    _check(doc)
    return doc


def _format(content_type: str) -> str:
    return "YAML" if content_type in YAML_TYPES else "JSON"
