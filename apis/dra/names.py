"""Kubernetes' names of Dynamic Resource Allocation besides the kinds: the annotation the
resourceclaim controller puts on the claims it generates, the finalizer that keeps an
allocated claim, and the standard device attributes (k8s.io/dynamic-resource-allocation's
`deviceattribute`) every driver may publish. (Tessera's driver name, `gpu.tessera.dev`, is `apis.dra.gpus.DRIVER`; the
DeviceClass of deploy/dra/ has the same name and selects its devices.)
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DELETE_PROTECTION_FINALIZER",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "PCIE_ROOT",
    "PCI_BUS_ID",
    "POD_CLAIM_NAME_ANNOTATION",
]

#: On a claim generated from a pod's template: the pod claim (`spec.resourceClaims[].name`) it is for.
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
#: Kept on an allocated claim (the scheduler adds it with the allocation); the resourceclaim
#: controller removes it once it has deallocated the claim.
DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
#: On the claim the scheduler makes for a pod's extended resources served through DRA ("true").
EXTENDED_RESOURCE_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
#: A DeviceClass `c` serves the extended resource `deviceclass.resource.kubernetes.io/c` besides
#: its `extendedResourceName` (kube's implicit name).
IMPLICIT_EXTENDED_RESOURCE_PREFIX: Final = "deviceclass.resource.kubernetes.io/"

#: Standard device attribute (string, `pci<domain>:<bus>`): the PCIe root complex a device sits
#: under, so a claim's `matchAttribute` can keep a GPU and a NIC on one root.
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
#: Standard device attribute (string, `<domain>:<bus>:<device>.<function>`): the PCI address.
PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"
