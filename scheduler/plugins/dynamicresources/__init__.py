"""DynamicResources: ResourceClaims (`resource.k8s.io/v1`) allocated by kube's structured
allocator, with DeviceShare's placement preferences, on one ledger with Koordinator's protocol."""

from scheduler.plugins.dynamicresources.args import DynamicResourcesArgs
from scheduler.plugins.dynamicresources.plugin import COMPILER, NAME, STORE, DynamicResources, new
from scheduler.plugins.dynamicresources.store import ClaimStore

__all__ = ["COMPILER", "NAME", "STORE", "ClaimStore", "DynamicResources", "DynamicResourcesArgs", "new"]
