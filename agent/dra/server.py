"""kubelet's DRA plugin gRPC API, served by the agent on two unix sockets.

kubelet finds DRA drivers the way it finds every plugin: its plugin watcher sees a socket appear
in `/var/lib/kubelet/plugins_registry` and calls `pluginregistration.Registration` on it —
`GetInfo` (type `DRAPlugin`, the driver name, the endpoint of the driver's own socket and the
gRPC services it serves, `v1.DRAPlugin` / `v1beta1.DRAPlugin`) and then
`NotifyRegistrationStatus`. Then it calls `NodePrepareResources` / `NodeUnprepareResources` on
the endpoint (`/var/lib/kubelet/plugins/gpu.tessera.dev/dra.sock` by default). Both DRA
versions have the same messages (v1beta1 lacks `Device.share_id`, which its peers skip), so one
servicer answers both service names.

A claim that cannot be prepared gets its error in its entry of the answer (kubelet shows it and
retries); an unexpected exception becomes that claim's "internal error" and is logged with its
stack, and the servers keep serving.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.message import Message

from agent.dra.driver import DRADriver, PrepareError
from apis.dra.gpus import DRIVER
from kube.unixsocket import UnixServer
from proto.kubelet.dra.v1 import api_pb2 as dra
from proto.kubelet.pluginregistration.v1 import api_pb2 as reg

__all__ = ["PLUGIN_TYPE", "SERVICES", "DRAPluginServer", "RegistrationServer"]

log = logging.getLogger(__name__)

PLUGIN_TYPE: Final = "DRAPlugin"
#: The registration name of each DRA service version -> its full gRPC service name.
SERVICES: Final = {
    "v1.DRAPlugin": "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
    "v1beta1.DRAPlugin": "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
}


RequestT = TypeVar("RequestT", bound=Message)
ResponseT = TypeVar("ResponseT", bound=Message)


def _unary(
    fn: Callable[[RequestT, grpc.ServicerContext], ResponseT], request: type[RequestT], response: type[ResponseT]
) -> grpc.RpcMethodHandler[RequestT, ResponseT]:
    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=request.FromString, response_serializer=response.SerializeToString
    )


class DRAPluginServer(UnixServer):
    """NodePrepareResources / NodeUnprepareResources of `driver`, on the plugin socket."""

    kind = "DRA plugin"

    def __init__(self, driver: DRADriver, *, socket_path: Path, max_workers: int = 4) -> None:
        self.driver = driver
        methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "NodePrepareResources": _unary(
                self.node_prepare_resources, dra.NodePrepareResourcesRequest, dra.NodePrepareResourcesResponse
            ),
            "NodeUnprepareResources": _unary(
                self.node_unprepare_resources, dra.NodeUnprepareResourcesRequest, dra.NodeUnprepareResourcesResponse
            ),
        }
        handlers = [grpc.method_handlers_generic_handler(service, methods) for service in SERVICES.values()]
        super().__init__(socket_path, handlers, mode=0o600, max_workers=max_workers)

    def node_prepare_resources(
        self, request: dra.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra.NodePrepareResourcesResponse:
        response = dra.NodePrepareResourcesResponse()
        for claim in request.claims:
            entry = response.claims[claim.uid]
            try:
                for answer in self.driver.prepare(claim.namespace, claim.name, claim.uid):
                    device = entry.devices.add(
                        request_names=[answer.request],
                        pool_name=answer.pool,
                        device_name=answer.device,
                        cdi_device_ids=list(answer.cdi_ids),
                    )
                    if answer.share_id:
                        device.share_id = answer.share_id
            except PrepareError as e:
                log.warning(
                    "Cannot prepare ResourceClaim",
                    extra={"claim": f"{claim.namespace}/{claim.name}", "uid": claim.uid, "err": str(e)},
                )
                entry.Clear()
                entry.error = str(e)
            except Exception:  # the call boundary: the other claims and calls go on
                log.exception("Preparing a ResourceClaim failed", extra={"claim": f"{claim.namespace}/{claim.name}"})
                entry.Clear()
                entry.error = "internal error in the agent's DRA plugin (see the agent's log)"
        return response

    def node_unprepare_resources(
        self, request: dra.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra.NodeUnprepareResourcesResponse:
        response = dra.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            entry = response.claims[claim.uid]
            try:
                self.driver.unprepare(claim.namespace, claim.name, claim.uid)
            except PrepareError as e:
                entry.error = str(e)
            except Exception:  # the call boundary
                log.exception("Unpreparing a ResourceClaim failed", extra={"claim": f"{claim.namespace}/{claim.name}"})
                entry.error = "internal error in the agent's DRA plugin (see the agent's log)"
        return response


class RegistrationServer(UnixServer):
    """`pluginregistration.Registration` on a socket in kubelet's plugins_registry directory."""

    kind = "DRA registration"

    def __init__(self, *, socket_path: Path, endpoint: Path) -> None:
        self.endpoint = endpoint
        self.registered = threading.Event()
        self.error = ""
        methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "GetInfo": _unary(self.get_info, reg.InfoRequest, reg.PluginInfo),
            "NotifyRegistrationStatus": _unary(
                self.notify_registration_status, reg.RegistrationStatus, reg.RegistrationStatusResponse
            ),
        }
        handler = grpc.method_handlers_generic_handler(
            reg.DESCRIPTOR.services_by_name["Registration"].full_name, methods
        )
        super().__init__(socket_path, [handler], mode=0o600, max_workers=2)

    def get_info(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=PLUGIN_TYPE, name=DRIVER, endpoint=str(self.endpoint), supported_versions=list(SERVICES)
        )

    def notify_registration_status(
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        if request.plugin_registered:
            self.error = ""
            self.registered.set()
            log.info(
                "Registered with kubelet as a DRA driver", extra={"driver": DRIVER, "endpoint": str(self.endpoint)}
            )
        else:
            self.error = request.error
            self.registered.clear()
            log.error("kubelet refused the DRA driver's registration", extra={"driver": DRIVER, "err": request.error})
        return reg.RegistrationStatusResponse()
