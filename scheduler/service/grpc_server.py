"""The gRPC API `tessera.scheduler.v1.Scheduler`, with the standard health and reflection services.

Serves on a unix socket (mode 0660 by default; a stale socket from a crashed scheduler is
replaced, a live one is never taken over) or on TCP, optionally with TLS (and client
certificates when a client CA is given). Each RPC is a loop boundary: bad input becomes
INVALID_ARGUMENT naming the problem, anything unexpected is logged with its stack and becomes
INTERNAL, and the server keeps serving. The health service says SERVING once the informers
have synced (`set_serving`), for both "" and the Scheduler service.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import stat
from collections.abc import Callable, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from apis.errors import ConfigError, TesseraError
from apis.k8s import resources
from apis.k8s.core import Pod
from kube import errors
from proto.scheduler.v1 import scheduler_pb2 as pb
from scheduler.cache import DeviceUsage
from scheduler.defrag import MigrationPlan, PlanOptions
from scheduler.framework import Status
from scheduler.service.endpoint import Endpoint
from scheduler.service.explain import Evaluation
from scheduler.service.inspector import DryRun, Explanation, Inspector, parse_pod_json
from scheduler.service.migrations import MigrationPlanner, NotPendingError, UnknownPodError
from scheduler.service.queue import PendingPod
from scheduler.service.settings import GRPCSettings

__all__ = ["SERVICE_NAME", "GRPCServer", "explain_response", "plan_response"]

log = logging.getLogger(__name__)

SERVICE: Final = pb.DESCRIPTOR.services_by_name["Scheduler"]
SERVICE_NAME: Final = SERVICE.full_name

_Req = TypeVar("_Req", bound=Message)


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class SchedulerAPI:
    """The RPCs over an `Inspector` (and a `MigrationPlanner` for PlanMigrations)."""

    def __init__(self, inspector: Inspector, planner: MigrationPlanner | None = None) -> None:
        self._inspector = inspector
        self._planner = planner

    def schedule(self, request: pb.ScheduleRequest) -> pb.ScheduleResponse:
        pod = _pod_from_json(request.pod_json)
        if request.profile and request.profile not in self._inspector.profiles:
            known = ", ".join(self._inspector.profiles)
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown profile {request.profile!r} (known: {known})")
        return schedule_response(self._inspector.dry_run(pod, profile=request.profile))

    def explain(self, request: pb.ExplainRequest) -> pb.ExplainResponse:
        if not request.name:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "name is required")
        return explain_response(self._inspector.explain(request.namespace or "default", request.name))

    def get_node_devices(self, request: pb.GetNodeDevicesRequest) -> pb.GetNodeDevicesResponse:
        found = self._inspector.node_devices(request.node)
        if request.node and not found.get(request.node):
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"node {request.node} has no devices known to the scheduler")
        return pb.GetNodeDevicesResponse(
            nodes=[pb.NodeDevices(node=node, devices=[_usage(u) for u in usage]) for node, usage in found.items()]
        )

    def list_pending(self, request: pb.ListPendingRequest) -> pb.ListPendingResponse:
        return pb.ListPendingResponse(
            pods=[_pending(p) for p in self._inspector.pending(request.namespace)],
            leader=self._inspector.is_leader(),
        )

    def plan_migrations(self, request: pb.PlanMigrationsRequest) -> pb.PlanMigrationsResponse:
        """INVALID_ARGUMENT for a bad request or a pod that is not pending, NOT_FOUND for an
        unknown one, UNAVAILABLE when the API server cannot be asked about it."""
        if self._planner is None:
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED, "this scheduler does not plan migrations")
        if request.max_migrations < 0:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"max_migrations must be >= 0, got {request.max_migrations}")
        options = PlanOptions(exclude=frozenset(request.exclude))
        if request.max_migrations:
            options = dataclasses.replace(options, max_migrations=request.max_migrations)
        return plan_response(self._planner.plan(self._pending_pod(request), options))

    def _pending_pod(self, request: pb.PlanMigrationsRequest) -> Pod:
        if request.pod_json:
            if request.name:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "give either name or pod_json, not both")
            pod = _pod_from_json(request.pod_json)
            if pod.node_name:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"pod {pod.key} has spec.nodeName: it is not pending")
            return pod
        if not request.name:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "name (or pod_json) is required")
        assert self._planner is not None
        try:
            return self._planner.pending_pod(request.namespace or "default", request.name)
        except UnknownPodError as e:
            raise _Abort(grpc.StatusCode.NOT_FOUND, str(e)) from None
        except NotPendingError as e:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        except errors.APIError as e:  # before its base class, TesseraError
            raise _Abort(grpc.StatusCode.UNAVAILABLE, f"cannot read the pod from the API server: {e}") from None
        except TesseraError as e:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"the scheduler cannot read this pod: {e}") from None

    def handler(self) -> grpc.GenericRpcHandler:
        methods: Mapping[str, Callable[[Any], Message]] = {
            "Schedule": self.schedule,
            "Explain": self.explain,
            "GetNodeDevices": self.get_node_devices,
            "ListPending": self.list_pending,
            "PlanMigrations": self.plan_migrations,
        }
        handlers = {}
        for method in SERVICE.methods:
            request_type: type[Message] = getattr(pb, method.input_type.name)
            response_type: type[Message] = getattr(pb, method.output_type.name)
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _boundary(method.name, methods[method.name]),
                request_deserializer=request_type.FromString,
                response_serializer=response_type.SerializeToString,
            )
        return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


def _pod_from_json(text: str) -> Pod:
    try:
        return parse_pod_json(json.loads(text))
    except ValueError as e:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"pod_json is not JSON: {e}") from None
    except TesseraError as e:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"pod_json is not a valid pod: {e}") from None


def _boundary(name: str, call: Callable[[_Req], Message]) -> Callable[[_Req, grpc.ServicerContext], Message]:
    def serve(request: _Req, context: grpc.ServicerContext) -> Message:
        try:
            return call(request)
        except _Abort as e:
            context.abort(e.code, e.details)
        except Exception as e:
            log.exception("RPC failed", extra={"rpc": name})
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
        raise AssertionError("unreachable: abort raises")

    return serve


class GRPCServer:
    """`start()` binds and serves in a thread pool; `stop()` ends serving and removes a unix socket."""

    def __init__(self, settings: GRPCSettings, inspector: Inspector, planner: MigrationPlanner | None = None) -> None:
        endpoint = settings.endpoint()
        if endpoint is None:
            raise ConfigError("the gRPC API is turned off (empty address)")
        self.endpoint = endpoint
        self._settings = settings
        self._api = SchedulerAPI(inspector, planner)
        self._health = health.HealthServicer()
        self._server: grpc.Server | None = None
        #: The bound TCP port (the real one when asked for port 0).
        self.port = 0

    @property
    def address(self) -> str:
        """What clients dial: `unix:///path` or `host:port` (with the bound port)."""
        if self.endpoint.socket is not None:
            return self.endpoint.target
        return Endpoint(host=self.endpoint.host, port=self.port).target

    def start(self) -> None:
        """Raises ConfigError when the address cannot be bound (or a live scheduler serves the socket)."""
        if self._server is not None:
            return
        if self.endpoint.socket is not None:
            _claim_socket(self.endpoint.socket)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._settings.workers, thread_name_prefix="scheduler-grpc"),
            handlers=[self._api.handler()],
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        self.set_serving(False)
        try:
            if self._settings.tls is not None:
                port = server.add_secure_port(self.endpoint.target, _credentials(self._settings))
            else:
                port = server.add_insecure_port(self.endpoint.target)
        except RuntimeError as e:
            raise ConfigError(f"gRPC API: cannot listen on {self.endpoint}: {e}") from e
        if port == 0 and self.endpoint.socket is None:
            raise ConfigError(f"gRPC API: cannot listen on {self.endpoint}")
        server.start()
        self.port = port
        if self.endpoint.socket is not None:
            os.chmod(self.endpoint.socket, self._settings.socket_mode)
        self._server = server
        log.info("Serving the gRPC API", extra={"address": self.address, "tls": self._settings.tls is not None})

    def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", SERVICE_NAME):
            self._health.set(name, status)

    def stop(self, grace: float = 1.0) -> None:
        """Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._health.enter_graceful_shutdown()
        server.stop(grace).wait()
        if self.endpoint.socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.endpoint.socket.unlink()


def _credentials(settings: GRPCSettings) -> grpc.ServerCredentials:
    tls = settings.tls
    assert tls is not None
    try:
        key, cert = tls.key.read_bytes(), tls.cert.read_bytes()
        client_ca = tls.client_ca.read_bytes() if tls.client_ca is not None else None
    except OSError as e:
        raise ConfigError(f"gRPC TLS: {e}") from e
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _claim_socket(path: Path) -> None:
    """Ready `path` for binding: make its directory (0700 when new), replace a dead socket.

    Refuses a directory others may write to without the sticky bit: anyone could swap the
    socket for their own there.
    """
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    mode = path.parent.stat().st_mode
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise ConfigError(f"{path.parent} is writable by others; refusing to serve a socket in it")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"{path} exists and is not a socket; refusing to replace it")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left behind by a process that is gone
            return
    raise ConfigError(f"{path}: another scheduler is serving on this socket")


# --- values -> messages -----------------------------------------------------------------------------------
def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return resources.format_list(amounts)


def _usage(u: DeviceUsage) -> pb.DeviceUsage:
    return pb.DeviceUsage(
        type=u.type.value,
        minor=u.minor,
        id=u.id,
        healthy=u.healthy,
        total=_quantities(u.total),
        free=_quantities(u.free),
        used=_quantities(u.used),
        holders=[
            pb.DeviceHolder(
                pod=h.pod,
                resources=_quantities(h.resources),
                vfs=[pb.VirtualFunction(minor=vf.minor, bus_id=vf.bus_id) for vf in h.vfs],
            )
            for h in u.holders
        ],
        pcie=u.pcie or "",
        numa=u.numa if u.numa is not None else -1,
    )


def _pending(p: PendingPod) -> pb.PendingPod:
    return pb.PendingPod(
        pod=p.key,
        uid=p.uid,
        queue=p.queue.value,
        attempts=p.attempts,
        priority=p.priority,
        message=p.message,
        plugins=sorted(p.plugins),
        waiting_seconds=p.waiting_seconds,
        backoff_seconds=p.backoff_seconds,
        profile=p.profile,
    )


def _reasons(status: Status) -> list[pb.PluginReason]:
    return [pb.PluginReason(plugin=status.plugin, reason=r) for r in status.reasons or ("rejected",)]


def _node_reasons(evaluation: Evaluation | None) -> list[pb.NodeReasons]:
    if evaluation is None:
        return []
    return [
        pb.NodeReasons(node=v.node, reasons=[r for s in v.rejections for r in _reasons(s)]) for v in evaluation.verdicts
    ]


def _nearest(evaluation: Evaluation | None) -> list[pb.NearMiss]:
    if evaluation is None:
        return []
    return [pb.NearMiss(node=node, missing=[str(s) for s in shortfalls]) for node, shortfalls in evaluation.nearest]


def schedule_response(result: DryRun) -> pb.ScheduleResponse:
    evaluation = result.evaluation
    reasons = _node_reasons(evaluation)
    if evaluation is not None and evaluation.rejected is not None:
        reasons = [pb.NodeReasons(node="", reasons=_reasons(evaluation.rejected))]
    return pb.ScheduleResponse(
        schedulable=result.node is not None,
        node=result.node or "",
        annotations=dict(result.annotations),
        reasons=reasons,
        message=result.status.message if result.node is None else f"would be bound to {result.node}",
        profile=result.profile,
        feasible_nodes=result.feasible_nodes,
    )


def explain_response(e: Explanation) -> pb.ExplainResponse:
    evaluation = e.evaluation
    queued = e.queued
    rejected = evaluation.rejected if evaluation is not None else None
    message = evaluation.message if evaluation is not None else ""
    return pb.ExplainResponse(
        pod=e.pod,
        pending=queued is not None,
        message=message,
        nodes=_node_reasons(evaluation),
        nearest=_nearest(evaluation),
        state=e.state,
        queue=queued.queue.value if queued is not None else "",
        attempts=queued.attempts if queued is not None else 0,
        last_attempt=e.last_attempt,
        node=e.node,
        fits=list(evaluation.fits) if evaluation is not None else [],
        profile=e.profile,
        devices=[
            pb.AllocatedDevice(type=dtype.value, minor=a.minor, resources=_quantities(a.resources))
            for dtype, allocs in sorted(e.devices.items(), key=lambda kv: kv[0].value)
            for a in allocs
        ],
        rejected=pb.PluginReason(plugin=rejected.plugin, reason=rejected.message) if rejected is not None else None,
        backoff_seconds=queued.backoff_seconds if queued is not None else 0.0,
        waiting_for=list(e.waiting_for),
        detail=e.detail,
    )


def plan_response(result: MigrationPlan) -> pb.PlanMigrationsResponse:
    return pb.PlanMigrationsResponse(
        feasible=result.feasible,
        node=result.node or "",
        migrations=[
            pb.Migration(pod=m.pod, uid=m.uid, from_node=m.from_node, to_node=m.to_node, gpu_percent=m.gpu_percent)
            for m in result.migrations
        ],
        message=result.message,
        freed_gpus=result.freed_gpus,
    )
