"""Decoding request bodies (JSON, YAML, or protobuf for a few kinds) without letting a client hurt the server.

Limits enforced here: no NaN/Infinity (they cannot be re-encoded as JSON), no YAML anchors or
aliases (an alias bomb expands exponentially when re-encoded), only JSON's types (YAML timestamps
stay strings, as Kubernetes' YAML-to-JSON conversion keeps them), YAML nested at most
`MAX_DEPTH` levels and of at most `MAX_YAML_NODES` nodes (413 beyond), and errors that say what
is wrong as a 400 instead of a stack trace.

What a body costs is bounded: JSON is decoded by C code (`json`, ~20 ms a MiB at worst); YAML by
libyaml (`yaml.CSafeLoader`; PyYAML's pure-Python loader where libyaml is missing), whose events
are counted first so an oversized or aliased document is refused before anything is built. A YAML
body that is JSON (what `kubectl apply --server-side` sends) takes the JSON path. `BodyDecoder`
decodes YAML bodies over `INLINE_YAML_BYTES` in a worker process at a lower CPU priority, so a
client sending megabytes of YAML does not stall the server's event loop for everyone else (a
2.9 MB YAML review took 8 s of the loop before).

A YAML number passes through a Go float64 in Kubernetes' YAML-to-JSON conversion, which writes
`3.0` as the JSON `3`: so a YAML body's integral floats become integers here, and a built-in
kind's int32 field takes `replicas: 3.0` in YAML (never in JSON, where Go's decoder refuses it).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import yaml

from apiserver import protobuf
from apiserver.errors import StatusError

__all__ = ["INLINE_YAML_BYTES", "MAX_DEPTH", "MAX_YAML_NODES", "BodyDecoder", "decode"]

log = logging.getLogger(__name__)

MAX_DEPTH = 100
#: Scalars, mappings and sequences in one YAML body (a 1.5 MiB object of ordinary fields has a few
#: tens of thousands); beyond it the body is refused (413) before it is built.
MAX_YAML_NODES = 100_000
#: YAML bodies larger than this are decoded in the worker process.
INLINE_YAML_BYTES = 16 * 1024
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STARTS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_ENDS = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
_GO_EXPONENT = 1e21
TOO_DEEP = "the object is nested too deeply"
JSON_TYPES = frozenset({"", "application/json", "*/*"})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml"})


class _Loader(_BASE_LOADER):  # type: ignore[valid-type,misc]  # CSafeLoader or SafeLoader, chosen at import
    """libyaml's safe loader (or PyYAML's) that leaves timestamps as strings; aliases are refused
    before it runs (`_scan`)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def _scan(data: bytes) -> None:
    """Count the document's nodes and depth from libyaml's events and refuse aliases, so that
    nothing is built for a document that would be refused (at most MAX_YAML_NODES events read)."""
    nodes = depth = 0
    for event in yaml.parse(data, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            line = f" (line {event.start_mark.line + 1})" if event.start_mark is not None else ""
            raise yaml.YAMLError(f"aliases are not allowed{line}")
        if isinstance(event, yaml.ScalarEvent):
            nodes += 1
        elif isinstance(event, _STARTS):
            nodes += 1
            depth += 1
            if depth > MAX_DEPTH:
                raise StatusError.bad_request(TOO_DEEP)
        elif isinstance(event, _ENDS):
            depth -= 1
        if nodes > MAX_YAML_NODES:
            raise StatusError.too_large(f"the YAML body has more than {MAX_YAML_NODES} nodes; send it as JSON")


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


def _looks_like_json(data: bytes) -> bool:
    return data.lstrip()[:1] in (b"{", b"[")


def decode(data: bytes, content_type: str, *, patch_types: frozenset[str] = frozenset()) -> Any:
    """The decoded body; raises a 400 for malformed input, a 413 for a YAML document of too many
    nodes and a 415 for an unknown format. Runs on the caller's thread (see `BodyDecoder`)."""
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
        doc = _yaml_as_json(data) if _looks_like_json(data) else _NOT_JSON
        if doc is _NOT_JSON:
            _scan(data)
            doc = yaml.load(data, Loader=_Loader)  # a safe loader: no arbitrary objects
    except (ValueError, yaml.YAMLError) as e:
        raise StatusError.bad_request(f"the body is not valid {_format(content_type)}: {e}") from None
    except RecursionError:
        raise StatusError.bad_request(TOO_DEEP) from None
    _check(doc)
    return doc


_NOT_JSON = object()


def _yaml_as_json(data: bytes) -> Any:
    """A YAML body written as JSON, decoded by the JSON decoder (C: fast); `_NOT_JSON` when it is not JSON."""
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except ValueError:
        return _NOT_JSON


def _in_worker(data: bytes, content_type: str) -> tuple[int, str, str, bytes]:
    """The worker process's job: (0, "", "", the document as JSON), or the refusal's code, reason
    and message (a StatusError does not cross processes)."""
    try:
        doc = decode(data, content_type)
    except StatusError as e:
        return e.code, e.reason, e.message, b""
    return 0, "", "", json.dumps(doc, separators=(",", ":")).encode()


def _lower_priority() -> None:
    os.nice(10)  # the server's own requests come first


class BodyDecoder:
    """Decodes bodies for the handlers: small ones on the event loop, large YAML in a worker process.

    One worker, started on first use, at nice 10, decoding one body at a time; its answer comes
    back as JSON (decoded by C). Bodies waiting for it take turns by identity (`flow`), so one
    client's pile of YAML does not keep another's single body waiting. A worker that dies is
    replaced on the next body. `close()` stops it."""

    def __init__(self, *, inline_yaml_bytes: int = INLINE_YAML_BYTES) -> None:
        self._inline = inline_yaml_bytes
        self._pool: ProcessPoolExecutor | None = None
        self._busy = False
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}

    async def decode(
        self, data: bytes, content_type: str, *, patch_types: frozenset[str] = frozenset(), flow: str = ""
    ) -> Any:
        if content_type not in YAML_TYPES or len(data) <= self._inline or _looks_like_json(data):
            return decode(data, content_type, patch_types=patch_types)
        await self._turn(flow)
        try:
            return await self._in_pool(data, content_type)
        finally:
            self._next()

    async def _turn(self, flow: str) -> None:
        """Wait until the worker is this body's (flows in turn, each flow's bodies in order)."""
        if not self._busy:
            self._busy = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(flow, collections.deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._next()  # handed the worker as its request went away
            raise

    def _next(self) -> None:
        """Hand the worker to the next flow in turn (the one that waited longest for its turn)."""
        while self._waiting:
            flow = next(iter(self._waiting))
            queue = self._waiting.pop(flow)
            turn = queue.popleft()
            if queue:
                self._waiting[flow] = queue  # to the back of the round
            if not turn.done():
                turn.set_result(None)
                return
        self._busy = False

    async def _in_pool(self, data: bytes, content_type: str) -> Any:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=_lower_priority)
        try:
            code, reason, message, doc = await asyncio.wrap_future(self._pool.submit(_in_worker, data, content_type))
        except BrokenProcessPool:
            log.warning("YAML decoder process died; starting another", extra={"bytes": len(data)})
            self._pool = None
            raise StatusError.internal("the YAML decoder failed") from None
        if code:
            raise StatusError(code, reason, message)
        return json.loads(doc)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _format(content_type: str) -> str:
    return "YAML" if content_type in YAML_TYPES else "JSON"
