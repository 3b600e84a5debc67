"""kubelet's side of DRA plugins: find them in the registry directory, register them, call them.

What kubelet's plugin watcher and DRA manager do over the wire, for the simulated kubelet and for
tests that play kubelet: every unix socket in the plugins_registry directory is asked `GetInfo`;
a `DRAPlugin` that serves a DRA version kubelet knows (`v1.DRAPlugin` preferred, then
`v1beta1.DRAPlugin`) is registered under its driver name and told so
(`NotifyRegistrationStatus`), anything else is told why not. Calls then go to the plugin's
endpoint (the registration socket itself when it names none), on the chosen version's service.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import grpc
from google.protobuf.message import Message

from proto.kubelet.dra.v1 import api_pb2 as dra
from proto.kubelet.pluginregistration.v1 import api_pb2 as reg

__all__ = ["ClaimRef", "DRAPluginClient", "PluginWatcher"]

log = logging.getLogger(__name__)

#: The DRA versions kubelet knows, most recent first: registration name -> gRPC service.
_SERVICES: Final = (
    ("v1.DRAPlugin", "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"),
    ("v1beta1.DRAPlugin", "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"),
)
_REGISTRATION: Final = "/pluginregistration.Registration"
_TIMEOUT_S: Final = 45.0  # kubelet's per-call timeout for DRA plugins


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str

    def message(self) -> dra.Claim:
        return dra.Claim(namespace=self.namespace, name=self.name, uid=self.uid)


ResponseT = TypeVar("ResponseT", bound=Message)


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _unary(channel: grpc.Channel, path: str, request: Message, response: type[ResponseT]) -> ResponseT:
    call: grpc.UnaryUnaryMultiCallable[Message, ResponseT] = channel.unary_unary(
        path, request_serializer=_serialize, response_deserializer=response.FromString
    )
    return call(request, timeout=_TIMEOUT_S)


class DRAPluginClient:
    """One registered DRA driver: NodePrepareResources / NodeUnprepareResources on its endpoint."""

    def __init__(self, name: str, endpoint: Path, service: str) -> None:
        self.name = name
        self.endpoint = endpoint
        self.service = service

    def prepare(self, claims: Iterable[ClaimRef]) -> dra.NodePrepareResourcesResponse:
        """Raises grpc.RpcError for a call-wide failure; per-claim errors are in the answer."""
        request = dra.NodePrepareResourcesRequest(claims=[c.message() for c in claims])
        with grpc.insecure_channel(f"unix://{self.endpoint}") as channel:
            answer = _unary(channel, f"/{self.service}/NodePrepareResources", request, dra.NodePrepareResourcesResponse)
        return answer

    def unprepare(self, claims: Iterable[ClaimRef]) -> dra.NodeUnprepareResourcesResponse:
        request = dra.NodeUnprepareResourcesRequest(claims=[c.message() for c in claims])
        with grpc.insecure_channel(f"unix://{self.endpoint}") as channel:
            answer = _unary(
                channel, f"/{self.service}/NodeUnprepareResources", request, dra.NodeUnprepareResourcesResponse
            )
        return answer


class PluginWatcher:
    """The DRA plugins registered from one plugins_registry directory. `scan()` registers new
    sockets (kubelet watches the directory; callers scan when they need a driver)."""

    def __init__(self, registry_dir: Path) -> None:
        self.registry_dir = registry_dir
        self.plugins: dict[str, DRAPluginClient] = {}
        self._seen: set[Path] = set()

    def plugin(self, driver: str) -> DRAPluginClient | None:
        """The registered plugin of `driver`, scanning for new sockets when it is not known."""
        if driver not in self.plugins:
            self.scan()
        return self.plugins.get(driver)

    def scan(self) -> None:
        """Register every socket not registered yet; one that does not answer is tried next time."""
        try:
            sockets = sorted(p for p in self.registry_dir.iterdir() if stat.S_ISSOCK(p.lstat().st_mode))
        except FileNotFoundError:
            return
        for path in sockets:
            if path in self._seen:
                continue
            try:
                self._register(path)
            except grpc.RpcError as e:
                log.info("Registration socket does not answer yet", extra={"socket": str(path), "err": str(e)})
                continue
            self._seen.add(path)

    def _register(self, path: Path) -> None:
        with grpc.insecure_channel(f"unix://{path}") as channel:
            info = _unary(channel, f"{_REGISTRATION}/GetInfo", reg.InfoRequest(), reg.PluginInfo)
            error = ""
            chosen = next((svc for version, svc in _SERVICES if version in info.supported_versions), None)
            if info.type != "DRAPlugin":
                error = f"plugin type {info.type!r} is not handled here (DRAPlugin only)"
            elif not info.name:
                error = "the plugin gave no name"
            elif chosen is None:
                error = f"none of the DRA versions {list(info.supported_versions)} is supported"
            status = reg.RegistrationStatus(plugin_registered=not error, error=error)
            _unary(channel, f"{_REGISTRATION}/NotifyRegistrationStatus", status, reg.RegistrationStatusResponse)
        if error or chosen is None:
            log.warning("Refused a plugin's registration", extra={"socket": str(path), "err": error})
            return
        endpoint = Path(info.endpoint) if info.endpoint else path
        self.plugins[info.name] = DRAPluginClient(info.name, endpoint, chosen)
        log.info("Registered DRA plugin", extra={"driver": info.name, "endpoint": str(endpoint), "service": chosen})
