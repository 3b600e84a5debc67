"""The components' shared library for living in Kubernetes; the only package that uses the
`kubernetes` client library (and only for kubeconfig credential plugins: `kube.authplugins`).

Talking to an API server: client construction (`Client`), informers (`Informer`,
`InformerFactory`), typed access to Tessera's CRDs (`crds.devices(client)`, ...), patch helpers
(`retry_on_conflict`), leader election (`LeaderElector`), events (`EventRecorder`) and the error
tree (`APIError`, ...). Running as a Kubernetes component does: klog-style logging (`kube.logs`),
the operational HTTP endpoints (`kube.serving`), child processes that serve (`kube.process`) and
gRPC on unix sockets as kubelet spells its endpoints (`kube.unixsocket`). Shared state of the
components that is not the protocol: the elastic quota state (`kube.quotas`). Imports `apis` only;
the embedded API server is a component of its own (`apiserver/`).
See docs/dev/kube.md for how to use them.

Names are loaded on first use (`kube.lazyexports`, which agent packages use too), so `import kube`
(and `tessera --help`, via `kube.logs`) does not pay for urllib3 and the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kube.lazyexports import lazy_exports

if TYPE_CHECKING:
    from kube.backoff import Backoff
    from kube.cache import Store
    from kube.client import Client, ClientSettings
    from kube.crds import TypedResource, devices, elastic_quotas, install_crds, pod_groups
    from kube.errors import (
        AlreadyExists,
        APIError,
        BadRequest,
        Conflict,
        Forbidden,
        Gone,
        Invalid,
        NotFound,
        ServerError,
        TooManyRequests,
        Unauthorized,
        Unreachable,
    )
    from kube.events import EventRecorder, ObjectReference
    from kube.informer import Handlers, Informer, InformerFactory, raw
    from kube.leaderelection import LeaderElectionSettings, LeaderElector
    from kube.patch import annotations_patch, labels_patch, retry_on_conflict
    from kube.resources import ResourceAPI, WatchEvent
    from kube.restconfig import RESTConfig, TLSConfig

_EXPORTS = {
    "APIError": "kube.errors",
    "AlreadyExists": "kube.errors",
    "Backoff": "kube.backoff",
    "BadRequest": "kube.errors",
    "Client": "kube.client",
    "ClientSettings": "kube.client",
    "Conflict": "kube.errors",
    "EventRecorder": "kube.events",
    "Forbidden": "kube.errors",
    "Gone": "kube.errors",
    "Handlers": "kube.informer",
    "Informer": "kube.informer",
    "InformerFactory": "kube.informer",
    "Invalid": "kube.errors",
    "LeaderElectionSettings": "kube.leaderelection",
    "LeaderElector": "kube.leaderelection",
    "NotFound": "kube.errors",
    "ObjectReference": "kube.events",
    "RESTConfig": "kube.restconfig",
    "ResourceAPI": "kube.resources",
    "ServerError": "kube.errors",
    "Store": "kube.cache",
    "TLSConfig": "kube.restconfig",
    "TooManyRequests": "kube.errors",
    "TypedResource": "kube.crds",
    "Unauthorized": "kube.errors",
    "Unreachable": "kube.errors",
    "WatchEvent": "kube.resources",
    "annotations_patch": "kube.patch",
    "devices": "kube.crds",
    "elastic_quotas": "kube.crds",
    "install_crds": "kube.crds",
    "labels_patch": "kube.patch",
    "pod_groups": "kube.crds",
    "raw": "kube.informer",
    "retry_on_conflict": "kube.patch",
}

__all__ = [
    "APIError",
    "AlreadyExists",
    "Backoff",
    "BadRequest",
    "Client",
    "ClientSettings",
    "Conflict",
    "EventRecorder",
    "Forbidden",
    "Gone",
    "Handlers",
    "Informer",
    "InformerFactory",
    "Invalid",
    "LeaderElectionSettings",
    "LeaderElector",
    "NotFound",
    "ObjectReference",
    "RESTConfig",
    "ResourceAPI",
    "ServerError",
    "Store",
    "TLSConfig",
    "TooManyRequests",
    "TypedResource",
    "Unauthorized",
    "Unreachable",
    "WatchEvent",
    "annotations_patch",
    "devices",
    "elastic_quotas",
    "install_crds",
    "labels_patch",
    "pod_groups",
    "raw",
    "retry_on_conflict",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
