"""How QoS sees the node's pods: two small seams the agent backs with its pod informer.

QoS never talks to the API server itself. The agent passes a `PodSource` (all pods bound to the
node, for the periodic loops) and a `PodLookup` (one pod by UID, for the hook path) — both plain
callables, so a test passes a list or a dict's `get`, and the agent its informer's cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from apis.k8s.core import Pod

__all__ = ["PodLookup", "PodSource"]


class PodSource(Protocol):
    """The pods bound to this node, as the agent currently knows them (e.g. an informer's cache).

    Called once per pass from a QoS loop's thread; must be cheap and must not block for long.
    Terminal pods may be included: QoS skips them.
    """

    def __call__(self) -> Iterable[Pod]: ...


class PodLookup(Protocol):
    """One pod of this node by metadata.uid, or None when the agent does not know it (yet).

    Called on the runtime-hook path (inside kubelet's CreateContainer), so it must answer from
    memory, never over the network.
    """

    def __call__(self, uid: str, /) -> Pod | None: ...
