"""How long the soak's pods stay on a lost node: their NoExecute tolerations.

Every pod the soak makes (its own, and the Deployments' and Jobs' templates) tolerates the node
lifecycle controller's `not-ready` and `unreachable` NoExecute taints for `seconds` rather than
the API server's default 300 s, so that a node lost for half a minute has its pods evicted and
replaced while it is lost (`invariants/nodes.py` checks that they go).
"""

from __future__ import annotations

from typing import Any

from apis.extension import names

__all__ = ["lost_node_tolerations"]


def lost_node_tolerations(seconds: float) -> list[dict[str, Any]]:
    return [
        {"key": key, "operator": "Exists", "effect": names.TAINT_EFFECT_NO_EXECUTE, "tolerationSeconds": int(seconds)}
        for key in (names.TAINT_NODE_NOT_READY, names.TAINT_NODE_UNREACHABLE)
    ]
