"""HTTP: from an aiohttp request to a registry call and back, with Kubernetes' status codes.

One catch-all route parses the path (`routing.py`), resolves the resource in the catalog and
dispatches on method and subresource. Every failure leaves through `StatusError` and becomes a
`Status` body; anything unexpected is logged with its stack and answered with a 500, so no
request can take the server down. Watches stream from `watch.EventLog` (see `_watch`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from apiserver import bodies, kubelet, scale, tables
from apiserver.apply import tracking
from apiserver.apply.server import APPLY_PATCH, server_side_apply
from apiserver.authz.escalation import REQUESTER
from apiserver.catalog import Catalog, ResourceType
from apiserver.discovery import Discovery
from apiserver.errors import Cause, StatusError, status_body, success_body
from apiserver.eviction import check_budgets
from apiserver.flowcontrol import FlowControl
from apiserver.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from apiserver.metrics import APIServerMetrics
from apiserver.pods import binder
from apiserver.registry import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, Entry, Registry, encode
from apiserver.routing import RequestInfo, parse_path, request_verb
from apiserver.schema import fieldvalidation, strategy
from apiserver.selectors import ObjectFilter, parse_field_selector, parse_label_selector
from apiserver.watch import Expired
from kube.logs import V

__all__ = ["Handlers", "WatchSettings"]

log = logging.getLogger(__name__)

PATCH_TYPES = frozenset({MERGE_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH})
_JSON = "application/json"
_PROTOBUF = "application/octet-stream"  # what kube-openapi answers for the protobuf document
_HEALTH = ("/healthz", "/livez", "/readyz")


@dataclass(frozen=True, slots=True)
class WatchSettings:
    #: How often a watch that asked for bookmarks gets one.
    bookmark_interval: float = 10.0
    #: A watch without timeoutSeconds ends after this long (clients re-watch), as kube-apiserver.
    default_timeout: float = 1800.0
    #: How often an idle watch checks that its client is still there.
    liveness_interval: float = 5.0


def _json_response(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON)


def status_response(error: StatusError) -> web.Response:
    response = _json_response(encode(error.to_status()), error.code)
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def _content_type(request: web.Request) -> str:
    """The body's media type; none given means JSON, as kube-apiserver assumes."""
    return request.content_type if "Content-Type" in request.headers else ""


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("1", "true")


def _int(query: Mapping[str, str], name: str, default: int = 0) -> int:
    text = query.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise StatusError.bad_request(f"{name}: invalid integer {text!r}") from None
    if value < 0:
        raise StatusError.bad_request(f"{name}: must not be negative, got {value}")
    return value


def _dry_run(query: Mapping[str, str], options: Mapping[str, Any] | None = None) -> bool:
    values = [query["dryRun"]] if "dryRun" in query else list((options or {}).get("dryRun") or ())
    for value in values:
        if value != "All":
            raise StatusError.bad_request(f'dryRun: unsupported value {value!r}: supported values: "All"')
    return bool(values)


_PROPAGATION = ("Foreground", "Background", "Orphan")


def _propagation(query: Mapping[str, str], options: Mapping[str, Any]) -> str:
    """A delete's propagationPolicy ("" for the type's default), from the query or DeleteOptions,
    with the deprecated `orphanDependents` read as kube-apiserver reads it."""
    policy = query.get("propagationPolicy") or options.get("propagationPolicy") or ""
    orphan = options.get("orphanDependents")
    if policy and orphan is not None:
        cause = Cause("propagationPolicy", "Invalid value: orphanDependents and propagationPolicy cannot both be set")
        raise StatusError.invalid("DeleteOptions", "", [cause])
    if orphan is not None:
        return "Orphan" if orphan else "Background"
    if policy and policy not in _PROPAGATION:
        cause = Cause(
            "propagationPolicy",
            f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"',
            "FieldValueNotSupported",
        )
        raise StatusError.invalid("DeleteOptions", "", [cause])
    return str(policy)


def _warning_header(text: str) -> str:
    """RFC 7234's `299 - "text"`, the text a quoted-string (kube escapes `"` and `\\`), so
    kubectl and client-go parse it and print the warning."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


class Handlers:
    def __init__(
        self,
        registry: Registry,
        catalog: Catalog,
        discovery: Discovery,
        *,
        watch: WatchSettings,
        ready: Callable[[], bool],
        metrics: APIServerMetrics | None = None,
        decoder: bodies.BodyDecoder | None = None,
        body_timeout: float = 60.0,
        flow: FlowControl | None = None,
    ) -> None:
        """`decoder` decodes bodies (large YAML off the event loop); `body_timeout` bounds how
        long a request's body may take to arrive (a client trickling one in holds a seat);
        `flow` charges each body to its sender's budget before it is decoded."""
        self._flow = flow
        self._metrics = metrics or APIServerMetrics()
        self._decoder = decoder or bodies.BodyDecoder()
        self._body_timeout = body_timeout
        self._registry = registry
        self._catalog = catalog
        self._discovery = discovery
        self._watch_settings = watch
        self._ready = ready
        self._closing = False

    def close_watches(self) -> None:
        """Ask every open watch to end (server shutdown)."""
        self._closing = True
        self._registry.hub.wake_all()

    # --- entry point -------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        try:
            manager = tracking.manager_for(request.query.get("fieldManager", ""), request.headers.get("User-Agent", ""))
            with (
                fieldvalidation.scope(request.query.get("fieldValidation", "")) as fields,
                tracking.updates_by(manager),
            ):
                response = await self._dispatch(request)
            for warning in fields.warnings:
                response.headers.add("Warning", _warning_header(warning))
        except StatusError as e:
            response = status_response(e)
        except web.HTTPRequestEntityTooLarge as e:
            response = status_response(StatusError.too_large(e.text or "the request body is too large"))
        except RecursionError:
            response = status_response(StatusError.bad_request(bodies.TOO_DEEP))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("Request failed", extra={"method": request.method, "path": request.path})
            response = status_response(StatusError.internal())
        self._metrics.requests.labels(request.method, str(response.status)).inc()
        if log.isEnabledFor(V(5)):
            log.log(
                V(5),
                "HTTP",
                extra={
                    "verb": request.method,
                    "uri": request.path_qs,
                    "status": response.status,
                    "latency": f"{(time.monotonic() - started) * 1000:.2f}ms",
                },
            )
        return response

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith(_HEALTH):
            if path.startswith("/readyz") and not self._ready():
                return web.Response(text="not ready", status=503)
            return web.Response(text="ok")
        if path == "/metrics" and request.method == "GET":
            return web.Response(body=self._metrics.exposition(), headers={"Content-Type": METRICS_CONTENT_TYPE})
        info = parse_path(path)
        if info.is_resource:
            return await self._resource(request, info)
        if request.method != "GET":
            raise StatusError.method_not_allowed(request.method, path)
        body = self._non_resource(request, info)
        if body is None:
            raise StatusError.no_route(path)
        if isinstance(body, web.Response):
            return body
        return _json_response(body)

    def _non_resource(self, request: web.Request, info: RequestInfo) -> bytes | web.Response | None:
        path = info.path.rstrip("/") or "/"
        if path == "/version":
            return self._discovery.version()
        if path == "/openapi/v2":
            if "protobuf" in request.headers.get("Accept", ""):
                return web.Response(body=self._discovery.openapi_v2(protobuf=True), content_type=_PROTOBUF)
            return self._discovery.openapi_v2(protobuf=False)
        if path == "/openapi/v3":
            return self._discovery.openapi_v3_root()
        if path.startswith("/openapi/v3/"):
            return self._discovery.openapi_v3(path.removeprefix("/openapi/v3/"))
        if info.prefix == "api":
            return (
                self._discovery.api_versions() if not info.version else self._discovery.resource_list("", info.version)
            )
        if info.prefix == "apis":
            if not info.group:
                return self._discovery.group_list()
            if not info.version:
                return self._discovery.group(info.group)
            return self._discovery.resource_list(info.group, info.version)
        return None

    # --- resources ---------------------------------------------------------------------------------
    async def _resource(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        rt = self._catalog.lookup(info.group, info.version, info.resource)
        if rt is None or info.extra or (info.namespaced_path and not rt.namespaced):
            raise StatusError.no_route(info.path)
        namespace = info.namespace if rt.namespaced else ""
        if rt.namespaced and info.name and not namespace:
            raise StatusError.no_route(info.path)
        method = request.method
        query = request.query
        if info.subresource:
            return await self._subresource(request, rt, namespace, info)
        verb = request_verb(method, bool(info.name), _flag(query, "watch"))
        if verb not in rt.verbs:
            raise StatusError.method_not_allowed(method, info.path)
        if rt.verbs == ("create",):  # the `bindings` collection
            if method != "POST" or info.name:
                raise StatusError.method_not_allowed(method, info.path)
            if not namespace:
                raise StatusError.no_route(info.path)
            body = await self.body(request)
            name = (body.get("metadata") or {}).get("name", "") if isinstance(body, dict) else ""
            return await self._bind(self._lookup("", "v1", "pods"), namespace, name, body)
        if not info.name:
            if method == "GET":
                flt = self._filter(rt, namespace, query)
                if _flag(query, "watch"):
                    return await self._watch(request, rt, flt)
                return self._list(request, rt, flt)
            if method == "POST":
                if rt.namespaced and not namespace:
                    raise StatusError.no_route(info.path)
                entry = await self._registry.create(rt, namespace, await self.body(request), dry_run=_dry_run(query))
                return self._object(request, rt, entry, 201)
            if method == "DELETE":
                options = await self._delete_options(request)
                flt = self._filter(rt, namespace, query)
                deleted = await self._registry.delete_collection(
                    rt, flt, dry_run=_dry_run(query, options), propagation=_propagation(query, options)
                )
                return self._list_response(request, rt, deleted, self._registry.rv)
            raise StatusError.method_not_allowed(method, info.path)
        if method == "GET":
            if _flag(query, "watch"):  # the deprecated single-object watch
                flt = ObjectFilter(
                    namespace, parse_label_selector(""), parse_field_selector(f"metadata.name={info.name}", rt)
                )
                return await self._watch(request, rt, flt)
            return self._object(request, rt, self._registry.get(rt, namespace, info.name))
        if method == "PUT":
            body = await self.body(request)
            entry = await self._registry.update(rt, namespace, info.name, body, dry_run=_dry_run(query))
            return self._object(request, rt, entry)
        if method == "PATCH":
            entry, created = await self._patch(request, rt, namespace, info.name, "")
            return self._object(request, rt, entry, 201 if created else 200)
        if method == "DELETE":
            options = await self._delete_options(request)
            entry, removed = await self._registry.delete(
                rt,
                namespace,
                info.name,
                preconditions=options.get("preconditions"),
                dry_run=_dry_run(query, options),
                propagation=_propagation(query, options),
            )
            return self._object(request, rt, entry, 200 if removed else 202)
        raise StatusError.method_not_allowed(method, info.path)

    async def _subresource(
        self, request: web.Request, rt: ResourceType, namespace: str, info: RequestInfo
    ) -> web.StreamResponse:
        sub, name, method = info.subresource, info.name, request.method
        if sub not in rt.subresources or not name:
            raise StatusError.no_route(info.path)
        if sub in kubelet.METHODS:
            return self._kubelet(request, rt, namespace, info)
        if sub == "status":
            if method == "GET":
                return self._object(request, rt, self._registry.get(rt, namespace, name))
            if method == "PUT":
                body = await self.body(request)
                entry = await self._registry.update(
                    rt, namespace, name, body, subresource="status", dry_run=_dry_run(request.query)
                )
                return self._object(request, rt, entry)
            if method == "PATCH":
                entry, _ = await self._patch(request, rt, namespace, name, "status")
                return self._object(request, rt, entry)
            raise StatusError.method_not_allowed(method, info.path)
        if sub == "scale":
            return await self._scale(request, rt, namespace, name)
        if method != "POST":
            raise StatusError.method_not_allowed(method, info.path)
        body = await self.body(request)
        if sub == "binding":
            return await self._bind(rt, namespace, name, body)
        if sub == "eviction":
            return await self._evict(rt, namespace, name, body)
        raise StatusError.no_route(info.path)

    def _kubelet(self, request: web.Request, pods: ResourceType, namespace: str, info: RequestInfo) -> web.Response:
        """pods/log, exec, attach, portforward: checked as kube-apiserver checks them, then
        answered as it answers when it cannot reach the node's kubelet (`kubelet.py`)."""
        if request.method not in kubelet.METHODS[info.subresource]:
            raise StatusError.method_not_allowed(request.method, info.path)
        pod = self._registry.get(pods, namespace, info.name).obj
        target = kubelet.target(info.subresource, pod, request.query.get("container", ""))
        if not target.node:
            return web.Response(body=b"", content_type="text/plain")  # the log of an unscheduled pod
        node = self._registry.get(self._lookup("", "v1", "nodes"), "", target.node).obj
        kubelet.check_upgrade(info.subresource, request.headers.get("Connection", ""))
        raise kubelet.unreachable(target, node)

    def _lookup(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self._catalog.lookup(group, version, plural)
        assert rt is not None
        return rt

    async def _bind(self, pods: ResourceType, namespace: str, name: str, binding: Any) -> web.Response:
        if not name:
            raise StatusError.bad_request("the binding must name its pod in metadata.name")
        strategy.decode_binding(binding)
        await self._registry.mutate(pods, namespace, name, binder(binding, name))
        return _json_response(encode(success_body(201)), 201)

    async def _evict(self, pods: ResourceType, namespace: str, name: str, eviction: Any) -> web.Response:
        if not isinstance(eviction, dict) or eviction.get("kind") not in (None, "Eviction"):
            raise StatusError.bad_request("the body must be an Eviction object")
        if (eviction.get("metadata") or {}).get("name", name) != name:
            raise StatusError.bad_request("the name of the eviction does not match the pod on the URL")
        options = eviction.get("deleteOptions") or {}
        if not isinstance(options, dict):
            raise StatusError.bad_request("deleteOptions must be an object")
        check_budgets(self._registry, self._catalog, self._registry.get(pods, namespace, name).obj)
        # No await between the check and the delete's staging: no other eviction runs in between.
        await self._registry.delete(pods, namespace, name, preconditions=options.get("preconditions"))
        return _json_response(encode(success_body(201)), 201)

    async def _scale(self, request: web.Request, rt: ResourceType, namespace: str, name: str) -> web.Response:
        """GET, PUT or PATCH `…/NAME/scale` (`scale.py`)."""
        method, dry_run = request.method, _dry_run(request.query)
        if method == "GET":
            doc = scale.scale_of(self._registry.get(rt, namespace, name))
        elif method == "PUT":
            doc = await scale.update_scale(
                self._registry, rt, namespace, name, await self.body(request), dry_run=dry_run
            )
        elif method == "PATCH":
            content_type = _content_type(request)
            if content_type not in PATCH_TYPES:
                raise StatusError.unsupported_media_type(content_type)
            patch = (content_type, await self.body(request, content_type))
            doc = await scale.patch_scale(self._registry, rt, namespace, name, patch, dry_run=dry_run)
        else:
            raise StatusError.method_not_allowed(method, request.path)
        return _json_response(encode(doc))

    async def _patch(
        self, request: web.Request, rt: ResourceType, namespace: str, name: str, subresource: str
    ) -> tuple[Entry, bool]:
        """The patched object, and whether the patch created it (server-side apply can)."""
        content_type = _content_type(request)
        if content_type == APPLY_PATCH:
            query = request.query
            return await server_side_apply(
                self._registry,
                rt,
                namespace,
                name,
                await self.body(request, content_type),
                manager=query.get("fieldManager", ""),
                force=_flag(query, "force"),
                subresource=subresource,
                dry_run=_dry_run(query),
            )
        if content_type not in PATCH_TYPES:
            raise StatusError.unsupported_media_type(content_type)
        patch = await self.body(request, content_type)
        entry = await self._registry.patch(
            rt, namespace, name, content_type, patch, subresource=subresource, dry_run=_dry_run(request.query)
        )
        return entry, False

    async def body(self, request: web.Request, content_type: str | None = None, *, patch: bool = True) -> Any:
        """The request's body, read within the body timeout and decoded (4xx StatusError when bad);
        `patch`: a patch's media types are JSON too (not for an access review)."""
        user = REQUESTER.get()
        data = await self._read_charged(request)
        return await self._decoder.decode(
            data,
            content_type or _content_type(request),
            patch_types=PATCH_TYPES if patch else frozenset(),
            flow=user.name if user is not None else "",
        )

    async def review_body(self, request: web.Request) -> Any:
        """An access review's body (JSON or YAML; a patch's media type is a 415)."""
        return await self.body(request, patch=False)

    async def _read_charged(self, request: web.Request) -> bytes:
        """The body, read once its sender's budget allows (flow control), and charged to it."""
        user = REQUESTER.get()
        if self._flow is None or user is None or not request.body_exists:
            return await self._read(request)
        await self._flow.before_body(user)
        data = await self._read(request)
        self._flow.after_body(user, data)
        return data

    async def _read(self, request: web.Request) -> bytes:
        length = request.content_length
        if not length or request.content.total_bytes >= length:
            return await request.read()  # all there (the usual case): nothing to wait for
        try:
            async with asyncio.timeout(self._body_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge as e:
            raise StatusError.too_large(e.text or "the request body is too large") from None
        except TimeoutError:
            user = REQUESTER.get()
            log.log(V(2), "Request body timed out", extra={"user": user.name if user else "", "path": request.path})
            raise StatusError(
                504, "Timeout", f"the request body did not arrive within {self._body_timeout:g}s"
            ) from None

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        data = await self._read_charged(request)
        if not data.strip():
            return {}
        user = REQUESTER.get()
        options = await self._decoder.decode(data, _content_type(request), flow=user.name if user is not None else "")
        if not isinstance(options, dict):
            raise StatusError.bad_request("the body of a DELETE must be a DeleteOptions object")
        pre = options.get("preconditions")
        if pre is not None and not isinstance(pre, dict):
            raise StatusError.bad_request("preconditions must be an object")
        return options

    @staticmethod
    def _filter(rt: ResourceType, namespace: str, query: Mapping[str, str]) -> ObjectFilter:
        return ObjectFilter(
            namespace,
            parse_label_selector(query.get("labelSelector", "")),
            parse_field_selector(query.get("fieldSelector", ""), rt),
        )

    # --- responses ---------------------------------------------------------------------------------
    @staticmethod
    def _body_for(rt: ResourceType, entry: Entry) -> bytes:
        """The stored bytes, re-labelled when a CRD's object is read through another served version."""
        if entry.obj.get("apiVersion") == rt.api_version:
            return entry.body
        return encode({**entry.obj, "apiVersion": rt.api_version})

    def _object(self, request: web.Request, rt: ResourceType, entry: Entry, status: int = 200) -> web.Response:
        if tables.wants_table(request.headers.get("Accept", "")):
            return _json_response(encode(tables.table(rt, [entry.obj], rv=str(entry.rv), query=request.query)), status)
        return _json_response(self._body_for(rt, entry), status)

    def _list(self, request: web.Request, rt: ResourceType, flt: ObjectFilter) -> web.Response:
        query = request.query
        rv_text = query.get("resourceVersion", "")
        if rv_text and rv_text != "0":
            wanted = self._requested_rv(rv_text)
            if query.get("resourceVersionMatch") == "Exact" and wanted != self._registry.rv:
                raise StatusError.gone(f"too old resource version: {wanted} ({self._registry.rv})")
        result = self._registry.list_objects(
            rt, flt, limit=_int(query, "limit"), continue_token=query.get("continue", "")
        )
        return self._list_response(
            request, rt, result.entries, result.rv, continue_token=result.continue_token, remaining=result.remaining
        )

    def _requested_rv(self, text: str) -> int:
        """A client's resourceVersion: 400 when not a number, 504 when newer than the server's."""
        try:
            rv = int(text)
        except ValueError:
            raise StatusError.bad_request(f"resourceVersion: invalid value {text!r}") from None
        if rv > self._registry.rv:
            raise StatusError(504, "Timeout", f"Too large resource version: {rv}, current: {self._registry.rv}")
        return rv

    def _list_response(
        self,
        request: web.Request,
        rt: ResourceType,
        entries: list[Entry],
        rv: int,
        *,
        continue_token: str = "",
        remaining: int | None = None,
    ) -> web.Response:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if continue_token:
            meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        if tables.wants_table(request.headers.get("Accept", "")):
            doc = tables.table(rt, [e.obj for e in entries], rv=str(rv), query=request.query, meta=meta)
            return _json_response(encode(doc))
        head = (
            b'{"kind":"'
            + rt.list_kind.encode()
            + b'","apiVersion":"'
            + rt.api_version.encode()
            + b'","metadata":'
            + encode(meta)
            + b',"items":['
        )
        return _json_response(head + b",".join(self._body_for(rt, e) for e in entries) + b"]}")

    # --- watch -------------------------------------------------------------------------------------
    async def _watch(self, request: web.Request, rt: ResourceType, flt: ObjectFilter) -> web.StreamResponse:
        query = request.query
        settings = self._watch_settings
        timeout = _int(query, "timeoutSeconds") or settings.default_timeout
        bookmarks = _flag(query, "allowWatchBookmarks")
        as_table = tables.wants_table(request.headers.get("Accept", ""))
        hub = self._registry.hub
        events_log = hub.log(rt.storage_id)
        rv_text = query.get("resourceVersion", "")
        initial: list[bytes] = []
        if rv_text in ("", "0"):
            cursor = self._registry.rv
            initial = [
                self._watch_line("ADDED", rt, e.obj, e.body, as_table=as_table, query=query)
                for e in self._registry.snapshot(rt, flt)
            ]
        else:
            cursor = self._requested_rv(rv_text)
        response = web.StreamResponse(headers={"Content-Type": _JSON, "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + settings.bookmark_interval
        try:
            if initial:
                await response.write(b"".join(initial))
            while not self._closing:
                try:
                    events = events_log.since(cursor)
                except Expired as e:
                    gone = status_body("Failure", 410, str(e), reason="Expired")
                    await response.write(b'{"type":"ERROR","object":' + encode(gone) + b"}\n")
                    break
                if events:
                    cursor = events[-1].rv
                    chunk = b"".join(self._event_lines(rt, flt, events, as_table, query))
                    if chunk:
                        await response.write(chunk)
                    continue
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    cursor = max(cursor, hub.published_rv)  # everything up to here was sent (no await since)
                    mark = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(cursor)}}
                    await response.write(b'{"type":"BOOKMARK","object":' + encode(mark) + b"}\n")
                    next_bookmark = now + settings.bookmark_interval
                    continue
                transport = request.transport
                if transport is None or transport.is_closing():
                    break
                wait = min(deadline, next_bookmark if bookmarks else deadline, now + settings.liveness_interval) - now
                try:
                    async with asyncio.timeout(max(wait, 0.001)):
                        await asyncio.shield(events_log.changed())
                except TimeoutError:
                    pass
        except ConnectionResetError:
            pass  # the client went away
        return response

    def _event_lines(
        self, rt: ResourceType, flt: ObjectFilter, events: list[Any], as_table: bool, query: Mapping[str, str]
    ) -> list[bytes]:
        plain = flt.is_everything and not as_table and all(e.obj.get("apiVersion") == rt.api_version for e in events)
        if plain:
            return [e.line() for e in events]
        lines = []
        for e in events:
            kind = e.type
            if not flt.is_everything:
                now_in = flt.matches(e.obj)
                was_in = e.prev is not None and flt.matches(e.prev)
                if kind == "MODIFIED":
                    if not now_in and not was_in:
                        continue
                    kind = "MODIFIED" if now_in and was_in else ("ADDED" if now_in else "DELETED")
                elif not now_in:
                    continue
            if not as_table and e.obj.get("apiVersion") == rt.api_version:
                lines.append(e.line(kind))
            else:
                lines.append(self._watch_line(kind, rt, e.obj, e.body, as_table=as_table, query=query))
        return lines

    @staticmethod
    def _watch_line(
        kind: str, rt: ResourceType, obj: Mapping[str, Any], body: bytes, *, as_table: bool, query: Mapping[str, str]
    ) -> bytes:
        if as_table:
            payload = encode(tables.table(rt, [obj], rv=obj["metadata"].get("resourceVersion", ""), query=query))
        elif obj.get("apiVersion") == rt.api_version:
            payload = body
        else:
            payload = encode({**obj, "apiVersion": rt.api_version})
        return b'{"type":"' + kind.encode() + b'","object":' + payload + b"}\n"
