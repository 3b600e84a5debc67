"""The names Dynamic Resource Allocation's components agree on besides the kinds: Kubernetes'
(the annotation the resourceclaim controller puts on claims it generates, the finalizer that
keeps an allocated claim) and Tessera's driver.

Tessera's agent is the DRA driver of the node's GPUs (issue 36: its ResourceSlices, its kubelet
plugin); the driver name is what its ResourceSlices say in `spec.driver`, what allocations
record in `results[].driver`, and what the DeviceClasses of deploy/ select with
`device.driver == "gpu.tessera.dev"`. It is Tessera's own (Koordinator defines no DRA driver),
under Tessera's domain, as vendors name theirs (`gpu.nvidia.com`).
"""

from __future__ import annotations

from typing import Final

from apis.extension.names import TESSERA_DOMAIN

__all__ = ["DELETE_PROTECTION_FINALIZER", "GPU_DEVICE_CLASS", "GPU_DRIVER", "POD_CLAIM_NAME_ANNOTATION"]

#: The driver of the GPUs Tessera's agent publishes.
GPU_DRIVER: Final = f"gpu.{TESSERA_DOMAIN}"
#: The DeviceClass of deploy/ and the chart that selects them (named as the driver, as vendors do).
GPU_DEVICE_CLASS: Final = GPU_DRIVER
#: On a claim generated from a pod's template: the pod claim (`spec.resourceClaims[].name`) it is for.
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
#: Kept on an allocated claim (the scheduler adds it with the allocation); the resourceclaim
#: controller removes it once it has deallocated the claim.
DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
