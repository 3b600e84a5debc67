"""Who answers "which pods to move so this pending pod fits": the scheduler's
`Scheduler.PlanMigrations` over gRPC (`GrpcPlanner`), behind a small `Planner` protocol so the
strategy can be tested with canned plans and the wire format stays in this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import grpc

from apis.errors import TesseraError
from kube import unixsocket
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc

__all__ = ["GrpcPlanner", "Migration", "Plan", "Planner", "PlannerError"]


class PlannerError(TesseraError):
    """The planner could not be asked (not running, not implementing PlanMigrations, timed out).

    `detail` is the problem without the pod (`UNIMPLEMENTED: ...`): the same for every pod asked."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


@dataclass(frozen=True, slots=True)
class Migration:
    #: namespace/name
    pod: str
    uid: str
    from_node: str
    to_node: str


@dataclass(frozen=True, slots=True)
class Plan:
    feasible: bool
    node: str
    migrations: tuple[Migration, ...]
    message: str


class Planner(Protocol):
    def plan(self, namespace: str, name: str, *, max_migrations: int, exclude: Sequence[str]) -> Plan:
        """The fewest migrations that make the pending pod placeable. Raises PlannerError."""
        ...


class GrpcPlanner:
    """The scheduler's PlanMigrations at `address`: a unix socket path or HOST:PORT (the channel
    connects lazily, so a scheduler that starts later is found)."""

    def __init__(self, address: str, *, timeout: float = 10.0) -> None:
        self.address = address
        self.timeout = timeout
        unix = address.startswith(("/", "unix:"))
        self._channel = grpc.insecure_channel(unixsocket.target(address) if unix else address)
        self._stub = scheduler_pb2_grpc.SchedulerStub(self._channel)  # type: ignore[no-untyped-call]  # generated

    def plan(self, namespace: str, name: str, *, max_migrations: int, exclude: Sequence[str]) -> Plan:
        request = pb.PlanMigrationsRequest(
            namespace=namespace, name=name, max_migrations=max_migrations, exclude=list(exclude)
        )
        try:
            answer = self._stub.PlanMigrations(request, timeout=self.timeout)
        except grpc.RpcError as e:
            why = f"{e.code().name}: {e.details()}" if isinstance(e, grpc.Call) else str(e)
            raise PlannerError(f"PlanMigrations for {namespace}/{name} at {self.address}: {why}", detail=why) from e
        return Plan(
            feasible=bool(answer.feasible),
            node=str(answer.node),
            migrations=tuple(Migration(m.pod, m.uid, m.from_node, m.to_node) for m in answer.migrations),
            message=str(answer.message),
        )

    def close(self) -> None:
        self._channel.close()
