"""DeviceShare: fine-grained GPU, RDMA and FPGA allocation (Koordinator's protocol)."""

from scheduler.plugins.deviceshare.allocator import (
    POLICIES,
    AllocationPolicy,
    FragmentationAwarePolicy,
    TopologyAwarePolicy,
)
from scheduler.plugins.deviceshare.args import DeviceShareArgs
from scheduler.plugins.deviceshare.plugin import NAME, DeviceShare, new

__all__ = [
    "NAME",
    "POLICIES",
    "AllocationPolicy",
    "DeviceShare",
    "DeviceShareArgs",
    "FragmentationAwarePolicy",
    "TopologyAwarePolicy",
    "new",
]
