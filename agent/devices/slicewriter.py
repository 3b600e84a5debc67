"""The ResourceSlice writer: keeps this node's DRA pools on the API server equal to what the agent knows.

The agent makes one when DRA publication is on (`--dra`) and hands it to the Device CR reporter,
which calls `sync` in each of its passes right after writing the Device CR — the same pass, from
the same inventory and health — so a GPU the CR marks unhealthy is tainted in its slice at once.

- **What**: `build()` gives the pools (agent/devices/slices.py); for each, the driver's slices
  with `spec.nodeName` = this node are listed (`fieldSelector=spec.driver=D,spec.nodeName=N`, the
  only list a node identity may make) and `slicepool.plan` says what to delete, update and create.
- **When**: every pass of the reporter. A pass that is not full (a wake between resyncs) sends
  nothing when the pools equal what this writer last wrote; a full pass re-lists, so a slice
  someone deleted or edited is put back.
- **Failures**: API errors propagate to the reporter, which retries its pass with backoff. A 409
  (someone wrote in between) re-lists and re-plans. An API server that does not serve
  `resource.k8s.io/v1` (Kubernetes before 1.34) is logged once; publication is retried on each
  full pass and the Device CR is reported all the same.

Metric: `tessera_agent_resource_slice_writes_total{operation}` (create, update, delete).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from agent.devices import slicepool
from agent.devices.slices import Pool
from apis import dra
from apis.dra.slice import ResourceSlice
from apis.errors import TesseraError
from kube import errors
from kube.client import Client
from kube.logs import V
from kube.patch import retry_on_conflict

__all__ = ["SliceWriter"]

log = logging.getLogger(__name__)


class SliceWriter:
    """Writes `build()`'s pools as this node's ResourceSlices; see the module docstring."""

    def __init__(
        self,
        client: Client,
        *,
        node_name: str,
        build: Callable[[], Sequence[Pool]],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.node_name = node_name
        self._slices = client.resource(dra.RESOURCE_SLICES)
        self._build = build
        #: What the last successful sync left on the server: (pools, owner uid).
        self._written: tuple[tuple[Pool, ...], str] | None = None
        self._unserved = False
        self._writes = Counter(
            "tessera_agent_resource_slice_writes",
            "ResourceSlice writes of the agent, by operation (create, update, delete).",
            ["operation"],
            registry=registry,
        )
        for operation in ("create", "update", "delete"):
            self._writes.labels(operation)

    def sync(self, node_uid: str, full: bool = True) -> bool:
        """Bring the node's slices in line once; True when something was written.

        `node_uid` is the Node's uid for the owner reference ("" while unknown: none). Raises
        kube.APIError when the API server fails (after re-planning on conflicts).
        """
        pools = tuple(self._build())
        if not full and self._written == (pools, node_uid):
            return False
        if self._unserved and not full:
            return False
        try:
            wrote = False
            for pool in pools:
                wrote = retry_on_conflict(functools.partial(self._sync_pool, pool, node_uid)) or wrote
        except _Unserved as e:
            if not self._unserved:
                log.warning(
                    "The API server does not serve ResourceSlices (resource.k8s.io/v1): not publishing DRA devices",
                    extra={"node": self.node_name, "error": str(e)},
                )
            self._unserved = True
            return False
        if self._unserved:
            log.info("Publishing DRA devices as ResourceSlices", extra={"node": self.node_name})
        self._unserved = False
        self._written = (pools, node_uid)
        return wrote

    def _sync_pool(self, pool: Pool, node_uid: str) -> bool:
        """List, plan, write. A 404 on an update (deleted in between) fails the pass: the next
        one re-lists. Raises _Unserved when the list itself is a 404."""
        selector = f"spec.driver={pool.driver},spec.nodeName={self.node_name}"
        try:
            listed = self._slices.list_all(field_selector=selector).items
        except errors.NotFound as e:  # a list of a served kind is never a 404
            raise _Unserved(str(e)) from e
        existing = []
        for raw in listed:
            parsed = self._parse(raw)
            if parsed is None:
                self._delete(str((raw.get("metadata") or {}).get("name") or ""))
            else:
                existing.append(parsed)
        owner = slicepool.node_owner(self.node_name, node_uid)
        plan = slicepool.plan(pool, existing, node_name=self.node_name, owner=owner)
        for s in plan.deletes:
            self._delete(s.name, uid=s.meta.uid, resource_version=s.meta.resource_version)
        for s in plan.updates:
            self._slices.update(s.to_dict())
            self._writes.labels("update").inc()
        for s in plan.creates:
            self._slices.create(s.to_dict())
            self._writes.labels("create").inc()
        if not plan.empty:
            log.log(
                V(2),
                "Updated ResourceSlices",
                extra={
                    "node": self.node_name,
                    "driver": pool.driver,
                    "generation": plan.generation,
                    "devices": len(pool.devices),
                    "tainted": ",".join(d.name for d in pool.devices if d.taints),
                    "creates": len(plan.creates),
                    "updates": len(plan.updates),
                    "deletes": len(plan.deletes),
                },
            )
        return not plan.empty

    def _delete(self, name: str, *, uid: str = "", resource_version: str = "") -> None:
        """Delete one of the node's slices (gone already: fine); preconditions as kube's controller."""
        try:
            self._slices.delete(name, uid=uid, resource_version=resource_version)
        except errors.NotFound:
            return
        self._writes.labels("delete").inc()

    @staticmethod
    def _parse(raw: Mapping[str, Any]) -> ResourceSlice | None:
        """A listed slice, or None (logged) for one that does not parse: it is deleted and
        written anew."""
        try:
            return ResourceSlice.from_dict(raw)
        except TesseraError as e:
            log.warning(
                "ResourceSlice on the API server is malformed; replacing it",
                extra={"resourceslice": (raw.get("metadata") or {}).get("name", ""), "error": str(e)},
            )
            return None


class _Unserved(Exception):
    """The API server does not serve ResourceSlices."""
