"""Diagnostics over HTTP, on Koordinator's paths, beside `/metrics`, `/healthz`, `/livez` and `/readyz`.

    GET  /apis/v1/__services__                                 every path served here, by method
    GET  /apis/v1/nodes/:nodeName                              what the scheduler knows of a node
    GET  /apis/v1/plugins/DeviceShare/nodeDeviceSummaries      Koordinator's NodeDeviceSummary, all nodes
    GET  /apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name
    GET  /apis/v1/plugins/Coscheduling/gangs                   every gang: members created, waiting, bound
    GET  /apis/v1/plugins/Coscheduling/gang/:namespace/:name   one gang
    PUT  /debug/flags/s   (body N)                             log the top-N score table per pod; 0: off
    PUT  /debug/flags/v   (body N)                             log verbosity, as kube-scheduler
    GET  /debug/scores                                         the latest score tables (markdown)
    GET  /metrics                                              Prometheus
    GET  /healthz, /livez, /readyz                             alive; informers synced

The server is a `kube.serving.Server` (threads, body limit, health, a handler's bug logged and
answered 500); this module adds the diagnostics routes and Koordinator's JSON error shape,
`{"message": "..."}`, which every error answer of its own takes. `/debug/flags/*` also accept
POST, as Koordinator's proposal spells them.

Everything but health needs a caller the API server authenticates and allows (`auth`), as
koord-scheduler serves these paths on kube-scheduler's secure port: they show which pods hold
which GPUs, and the flags change what the scheduler logs. RBAC names each by path and method
(`nonResourceURLs: ["/debug/flags/v"]`, verb `put`); a refusal is kube's `Status`.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from kube import serving
from kube.delegation import Delegation
from kube.logs import V
from scheduler.service.inspector import Inspector
from scheduler.service.scoretable import DebugFlags

__all__ = ["new_server"]

log = logging.getLogger(__name__)


def new_server(
    address: str,
    *,
    inspector: Inspector,
    debug: DebugFlags,
    registry: CollectorRegistry,
    liveness: Mapping[str, serving.Check],
    readiness: Mapping[str, serving.Check],
    auth: Delegation | None = None,
    tls: ssl.SSLContext | None = None,
) -> serving.Server:
    """The scheduler's HTTP server on `address` (`HOST:PORT`, `[::1]:PORT`), not yet started;
    `auth` None serves anyone (tests of the handlers)."""
    host, _, port = address.rpartition(":")
    diagnostics = _Diagnostics(inspector, debug)

    def services(_request: serving.Request) -> serving.Response:  # every route of `server`, built below
        by_method: dict[str, list[str]] = {}
        for route in server.routes:
            by_method.setdefault(route.method, []).append(route.path)
        return _json({method: sorted(paths) for method, paths in sorted(by_method.items())})

    server = serving.Server(
        "diagnostics HTTP",
        host=host.strip("[]"),
        port=int(port),
        registry=registry,
        liveness=liveness,
        readiness=readiness,
        routes=[serving.Route("GET", "/apis/v1/__services__", services), *diagnostics.routes()],
        error=_error,
        auth=auth,
        tls=tls,
    )
    return server


class _Diagnostics:
    """The handlers of Koordinator's diagnostics paths, over the inspector and the debug flags."""

    def __init__(self, inspector: Inspector, debug: DebugFlags) -> None:
        self._inspector = inspector
        self._debug = debug

    def routes(self) -> list[serving.Route]:
        summaries = "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries"
        return [
            serving.Route("GET", "/apis/v1/nodes/:nodeName", self._node),
            serving.Route("GET", summaries, self._summaries),
            serving.Route("GET", f"{summaries}/:name", self._summary),
            serving.Route("GET", "/apis/v1/plugins/Coscheduling/gangs", self._gangs),
            serving.Route("GET", "/apis/v1/plugins/Coscheduling/gang/:namespace/:name", self._gang),
            *(serving.Route(method, "/debug/flags/s", self._set_top_n) for method in ("PUT", "POST")),
            *(serving.Route(method, "/debug/flags/v", self._set_verbosity) for method in ("PUT", "POST")),
            serving.Route("GET", "/debug/scores", self._scores),
        ]

    # --- handlers -----------------------------------------------------------------------------------
    def _node(self, request: serving.Request) -> serving.Response:
        info = self._inspector.node_info(request.params["nodeName"])
        if info is None:
            return _error(404, f"cannot find node {request.params['nodeName']}")
        return _json(info)

    def _summaries(self, _request: serving.Request) -> serving.Response:
        return _json(self._inspector.device_summaries())

    def _summary(self, request: serving.Request) -> serving.Response:
        name = request.params["name"]
        found = self._inspector.device_summaries(name)
        if not found.get(name, {}).get("deviceTotal"):
            return _error(404, f"cannot find node {name}")
        return _json(found[name])

    def _gangs(self, _request: serving.Request) -> serving.Response:
        return _json(self._inspector.gangs())

    def _gang(self, request: serving.Request) -> serving.Response:
        namespace, name = request.params["namespace"], request.params["name"]
        found = self._inspector.gang(namespace, name)
        if found is None:
            return _error(404, f"cannot find gang {namespace}/{name}")
        return _json(found)

    def _set_top_n(self, request: serving.Request) -> serving.Response:
        value = _int_body(request.body)
        if value is None or value < 0:
            return _error(400, f"expected a number of nodes >= 0, got {request.body[:40]!r}")
        self._debug.set_top_n_scores(value)
        log.info("Debug flag changed", extra={"flag": "debugTopNScores", "value": value, "user": _who(request)})
        return serving.Response.text(f"successfully set debugTopNScores to {value}")

    def _set_verbosity(self, request: serving.Request) -> serving.Response:
        value = _int_body(request.body)
        if value is None or not 0 <= value <= 10:
            return _error(400, f"expected a verbosity in 0..10, got {request.body[:40]!r}")
        logging.getLogger().setLevel(V(value))
        log.info("Debug flag changed", extra={"flag": "verbosity", "value": value, "user": _who(request)})
        return serving.Response.text(f"successfully set klog.logging.verbosity to {value}")

    def _scores(self, _request: serving.Request) -> serving.Response:
        tables = self._debug.tables()
        if not tables:
            return serving.Response.text("no score tables yet; enable them with PUT /debug/flags/s (body: N)")
        return serving.Response(200, ("\n\n".join(tables) + "\n").encode(), "text/markdown; charset=utf-8")


def _who(request: serving.Request) -> str:
    return request.caller.name if request.caller is not None else "-"


def _json(doc: object, status: int = 200) -> serving.Response:
    return serving.Response.json(doc, status, pretty=True)


def _error(status: int, message: str) -> serving.Response:
    return _json({"message": message}, status)


def _int_body(body: bytes) -> int | None:
    try:
        return int(body.decode().strip())
    except (UnicodeDecodeError, ValueError):
        return None
