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
#: Formatted with `Overcommit.describe()`: a device that holdings bypassing the scheduler
#: over-committed is treated as full until they are resolved.
OVERCOMMITTED = "{overcommit}: nothing more is placed on it"
#: Formatted with the device type and the pods: pods whose device-allocated annotation cannot be
#: read (or is missing) may hold any device of that type on the node.
UNKNOWN_ALLOCATION = (
    "{type} devices in use by {pods} are unknown (device-allocated annotation unreadable or missing): "
    "no {type} device is given out on this node until it is fixed or the pod is deleted"
)
#: Formatted with the pod's provider and the node's (or "none"): a shared-GPU pod whose
#: `koordinator.sh/gpu-isolation-provider` label the node's does not match (Koordinator:
#: "GPUIsolationProviderHAMICore not found on the node").
ISOLATION_PROVIDER_MISMATCH = (
    "GPU isolation provider {want} not found on the node (pod label {label}={want}, node label: {have})"
)
#: Formatted with the model and vendor, as Koordinator words it (`gpuShareUnsupportedModels`).
SHARE_UNSUPPORTED_MODEL = 'model "{model}" of vendor "{vendor}" does not support GPU Share'
#: As Koordinator words it: a share that must match a GPU shared-resource template matches none
#: (PreFilter), or none of the node's GPU model (Filter).
NO_MATCHED_TEMPLATE = "no matched GPU shared resource template"
#: GPU partitions (Koordinator's words): the partitions bind the pod, but the node has no table,
#: none of the pod's GPU count, or none of them free.
MISSING_PARTITION_TABLE = "node(s) missing GPU Partition Table"
UNSUPPORTED_GPU_COUNT = "node(s) Unsupported number of GPU requests"
INSUFFICIENT_PARTITIONED = "Insufficient Partitioned GPU Devices"
