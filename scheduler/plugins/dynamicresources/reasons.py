"""Why DynamicResources rejects a pod or a node: the words users read in events and `tessera explain`."""

from typing import Final

#: A template's claim the resourceclaim controller has not made yet (kube waits the same way).
WAITING_FOR_CLAIM: Final = (
    "waiting for the resourceclaim controller to create the ResourceClaim for pod claim {claim} (template {template})"
)
CLAIM_NOT_FOUND: Final = "ResourceClaim {claim} not found"
CLAIM_DELETING: Final = "ResourceClaim {claim} is being deleted"
CLAIM_NOT_OWNED: Final = "ResourceClaim {claim} was not created for this pod (not owned by it)"
RESERVED_FOR_FULL: Final = "ResourceClaim {claim} is reserved for the maximum of {max} consumers"
#: A claim allocated earlier whose devices the node cannot reach.
ALLOCATED_ELSEWHERE: Final = "ResourceClaim {claim} is allocated to devices not reachable from this node"
BOTH_PROTOCOLS: Final = (
    "the pod asks for GPUs both in Koordinator's resources ({resources}) and through ResourceClaims: "
    "ask in one of the two"
)
#: A claim's own error (a class that does not exist, a selector that does not compile or fails).
CLAIM_ERROR: Final = "cannot allocate: {reason}"
#: A node whose GPUs may be held by bound pods whose records cannot be read.
UNKNOWN_GPUS: Final = "GPUs of this node may be held by pods whose allocation is unknown: {pods}"
#: The claim for the pod's extended resources, made by an earlier attempt and not allocated.
EXTENDED_CLAIM_LEFT: Final = (
    "ResourceClaim {claim} for the pod's extended resources was left unallocated by an earlier attempt: "
    "delete it to try again"
)
