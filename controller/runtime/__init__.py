"""The controller runtime: what every Tessera controller is built on (controller-runtime, in small).

A controller is a `Reconciler` — `name`, `reconcile(key) -> Result`, `reference(key)` — plus the
informers whose changes name keys for it. The runtime supplies the rest: rate-limited work queues
(dedup, one worker per key, per-key backoff and an overall retry limit), the outcome handling
(`TemporaryError` retries, `PermanentError` becomes an Event, anything else is logged with its
stack and retried), leader election, `/healthz` `/readyz` `/metrics`, and a clean shutdown.

    manager = Manager(client, ManagerSettings(leader_election=LeaderElectionSettings("my-ctl")))
    nodes = manager.informers.informer(resources.NODES, parse=Node.from_dict)
    ctl = manager.add(MyReconciler(nodes.store, ...), ControllerOptions(workers=4))
    ctl.watch(nodes, keys=lambda node: [node.name])
    manager.run(stop_event)

See docs/dev/controller-runtime.md for the contract in full.
"""

from controller.runtime.controller import Controller, ControllerOptions
from controller.runtime.errors import PermanentError, ReconcileError, TemporaryError
from controller.runtime.malformed import Malformed, tolerant
from controller.runtime.manager import Manager, ManagerSettings
from controller.runtime.metrics import Metrics
from controller.runtime.ratelimit import RateLimiterSettings
from controller.runtime.reconciler import Reconciler, Result
from controller.runtime.workqueue import WorkQueue

__all__ = [
    "Controller",
    "ControllerOptions",
    "Malformed",
    "Manager",
    "ManagerSettings",
    "Metrics",
    "PermanentError",
    "RateLimiterSettings",
    "ReconcileError",
    "Reconciler",
    "Result",
    "TemporaryError",
    "WorkQueue",
    "tolerant",
]
