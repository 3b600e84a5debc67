"""Nodes an earlier `tessera up` on this data directory ran and this one does not (`--nodes 3`,
then `--nodes 1`; `--no-local-agent` after a run with it): removed before the agents start.

Nothing would keep such a Node honest: its simulated kubelet is gone, and with no node lifecycle
controller here its last Ready condition, its Device CR and its ResourceSlices would stand forever, so the scheduler
would go on placing pods where nothing runs them. In a cluster, a node that is gone for good is
deleted, and the pod garbage collector then deletes the pods bound to it; this does the same:
pods first, the Node last.

Only nodes an earlier run named in its state file are touched, never a node someone else
registered with this API server; they stay named there until they are gone
(`UpState.retiring`), so a start that fails half-way does not forget them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from apis import dra
from apis.extension import names
from kube import errors
from kube.client import Client
from kube.resources import NODES, PODS, ResourceAPI

__all__ = ["RetiredNode", "retire_nodes"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetiredNode:
    name: str
    #: The pods that were bound to it, deleted with it (`namespace/name`).
    pods: tuple[str, ...]


def retire_nodes(client: Client, nodes: Iterable[str]) -> list[RetiredNode]:
    """Delete each of `nodes` with its Device CR, its ResourceSlices and the pods bound to it;
    say which existed.

    What is already gone is skipped, so running it twice does no harm.
    """
    pods, devices, node_api = client.resource(PODS), client.resource(names.DEVICES), client.resource(NODES)
    slices = client.resource(dra.RESOURCE_SLICES)
    retired = []
    for node in sorted(set(nodes)):
        bound = pods.list_all(field_selector=f"spec.nodeName={node}").items
        # At once, as the pod garbage collector does: no kubelet is left to finish a graceful delete.
        deleted = [
            f"{namespace}/{name}"
            for namespace, name in ((p["metadata"]["namespace"], p["metadata"]["name"]) for p in bound)
            if _deleted(pods, name, namespace=namespace, grace_period_seconds=0)
        ]
        _deleted(devices, node)
        for s in slices.list_all(field_selector=f"spec.nodeName={node}").items:
            _deleted(slices, s["metadata"]["name"])
        if _deleted(node_api, node) or deleted:
            log.info("Removed a node this run does not run", extra={"node": node, "pods": len(deleted)})
            retired.append(RetiredNode(node, tuple(deleted)))
    return retired


def _deleted(api: ResourceAPI, name: str, *, namespace: str = "", grace_period_seconds: int | None = None) -> bool:
    """Delete; False when it was already gone."""
    try:
        api.delete(name, namespace=namespace, grace_period_seconds=grace_period_seconds)
    except errors.NotFound:
        return False
    return True
