"""The node-local device ledger: which pods on this node hold which device shares.

The hook server's `device-collision` plugin (`agent.hooks.collision`) asks it before a container
is created and refuses the container when its devices collide with what running pods hold.
`model` holds the plain data, `check` the pure collision rules, `ledger` the thread-safe state fed
by the hook server and the agent's pod informer.
"""

from agent.ledger.check import collisions
from agent.ledger.ledger import DeviceLedger, claim_key, counted, pod_key
from agent.ledger.model import Claim, Collision, CollisionKind, GPUSlot, NodeSlots, RDMASlot

__all__ = [
    "Claim",
    "Collision",
    "CollisionKind",
    "DeviceLedger",
    "GPUSlot",
    "NodeSlots",
    "RDMASlot",
    "claim_key",
    "collisions",
    "counted",
    "pod_key",
]
