"""Dynamic Resource Allocation (`resource.k8s.io/v1`): the kinds Kubernetes defines for devices.

Declared here, in the pure protocol layer, because the API server serves them, the controllers
manage them, and the scheduler's core allocates from them — and the scheduling core may not import
`kube`. What each kind's fields mean is Kubernetes' (k8s.io/api/resource/v1); Tessera adds no field.
"""

from __future__ import annotations

from typing import Final

from apis.extension.names import GroupVersionResource

__all__ = ["DEVICE_CLASSES", "GROUP", "RESOURCE_CLAIMS", "RESOURCE_CLAIM_TEMPLATES", "RESOURCE_SLICES", "VERSION"]

GROUP: Final = "resource.k8s.io"
VERSION: Final = "v1"

DEVICE_CLASSES: Final = GroupVersionResource(GROUP, VERSION, "deviceclasses", "DeviceClass", False)
RESOURCE_CLAIMS: Final = GroupVersionResource(GROUP, VERSION, "resourceclaims", "ResourceClaim", True, True)
RESOURCE_CLAIM_TEMPLATES: Final = GroupVersionResource(
    GROUP, VERSION, "resourceclaimtemplates", "ResourceClaimTemplate", True
)
RESOURCE_SLICES: Final = GroupVersionResource(GROUP, VERSION, "resourceslices", "ResourceSlice", False)
