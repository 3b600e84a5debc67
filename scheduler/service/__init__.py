"""The live scheduler: the scheduling core connected to a cluster (`tessera scheduler`).

Informers feed the core's cache and a scheduling queue; one loop runs the cycles; a binder
annotates and binds asynchronously; a gRPC API (Schedule, Explain, GetNodeDevices, ListPending)
and a diagnostics HTTP server (Koordinator's paths, `/metrics`) tell people and programs what it
decided and why. Leader election lets several replicas run. See docs/user/scheduler.md.

The top of the scheduler's layers: it imports the core, never the other way round.
"""

from scheduler.service.endpoint import ADDRESS_ENV, Endpoint, default_address
from scheduler.service.process import run
from scheduler.service.service import SchedulerService
from scheduler.service.settings import (
    BinderSettings,
    GRPCSettings,
    HTTPSettings,
    QueueSettings,
    SchedulerSettings,
    TLSSettings,
)

__all__ = [
    "ADDRESS_ENV",
    "BinderSettings",
    "Endpoint",
    "GRPCSettings",
    "HTTPSettings",
    "QueueSettings",
    "SchedulerService",
    "SchedulerSettings",
    "TLSSettings",
    "default_address",
    "run",
]
