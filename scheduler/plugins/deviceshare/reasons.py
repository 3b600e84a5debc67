"""Rejection reasons of DeviceShare, worded as Koordinator's so users and tools recognise them."""

#: Formatted with the device type (`Insufficient gpu devices`).
INSUFFICIENT_DEVICES = "Insufficient {type} devices"
#: Formatted with the upper-case device type (`Insufficient Topology Scoped GPU Devices`).
INSUFFICIENT_TOPOLOGY_SCOPED = "Insufficient Topology Scoped {type} Devices"
#: Formatted with the device type (`Insufficient rdma VirtualFunctions`).
INSUFFICIENT_VFS = "Insufficient {type} VirtualFunctions"
JOINT_ALLOCATE_VIOLATION = "node(s) Device Joint-Allocate rules violation"
#: Formatted with what the request rules say (the message of an InvalidRequestError).
INVALID_REQUEST = "invalid device request: {reason}"
