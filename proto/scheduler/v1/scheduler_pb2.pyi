from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PluginReason(_message.Message):
    __slots__ = ("plugin", "reason")
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    plugin: str
    reason: str
    def __init__(self, plugin: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class NodeReasons(_message.Message):
    __slots__ = ("node", "reasons")
    NODE_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    node: str
    reasons: _containers.RepeatedCompositeFieldContainer[PluginReason]
    def __init__(self, node: _Optional[str] = ..., reasons: _Optional[_Iterable[_Union[PluginReason, _Mapping]]] = ...) -> None: ...

class ScheduleRequest(_message.Message):
    __slots__ = ("pod_json", "profile")
    POD_JSON_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    pod_json: str
    profile: str
    def __init__(self, pod_json: _Optional[str] = ..., profile: _Optional[str] = ...) -> None: ...

class ScheduleResponse(_message.Message):
    __slots__ = ("schedulable", "node", "annotations", "reasons", "message", "profile", "feasible_nodes")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_NODES_FIELD_NUMBER: _ClassVar[int]
    schedulable: bool
    node: str
    annotations: _containers.ScalarMap[str, str]
    reasons: _containers.RepeatedCompositeFieldContainer[NodeReasons]
    message: str
    profile: str
    feasible_nodes: int
    def __init__(self, schedulable: _Optional[bool] = ..., node: _Optional[str] = ..., annotations: _Optional[_Mapping[str, str]] = ..., reasons: _Optional[_Iterable[_Union[NodeReasons, _Mapping]]] = ..., message: _Optional[str] = ..., profile: _Optional[str] = ..., feasible_nodes: _Optional[int] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class NearMiss(_message.Message):
    __slots__ = ("node", "missing")
    NODE_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    node: str
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node: _Optional[str] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class AllocatedDevice(_message.Message):
    __slots__ = ("type", "minor", "resources")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    type: str
    minor: int
    resources: _containers.ScalarMap[str, str]
    def __init__(self, type: _Optional[str] = ..., minor: _Optional[int] = ..., resources: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("pod", "pending", "message", "nodes", "nearest", "state", "queue", "attempts", "last_attempt", "node", "fits", "profile", "devices", "rejected", "backoff_seconds", "waiting_for", "detail")
    POD_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEAREST_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    FITS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FOR_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    pod: str
    pending: bool
    message: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeReasons]
    nearest: _containers.RepeatedCompositeFieldContainer[NearMiss]
    state: str
    queue: str
    attempts: int
    last_attempt: str
    node: str
    fits: _containers.RepeatedScalarFieldContainer[str]
    profile: str
    devices: _containers.RepeatedCompositeFieldContainer[AllocatedDevice]
    rejected: PluginReason
    backoff_seconds: float
    waiting_for: _containers.RepeatedScalarFieldContainer[str]
    detail: str
    def __init__(self, pod: _Optional[str] = ..., pending: _Optional[bool] = ..., message: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[NodeReasons, _Mapping]]] = ..., nearest: _Optional[_Iterable[_Union[NearMiss, _Mapping]]] = ..., state: _Optional[str] = ..., queue: _Optional[str] = ..., attempts: _Optional[int] = ..., last_attempt: _Optional[str] = ..., node: _Optional[str] = ..., fits: _Optional[_Iterable[str]] = ..., profile: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[AllocatedDevice, _Mapping]]] = ..., rejected: _Optional[_Union[PluginReason, _Mapping]] = ..., backoff_seconds: _Optional[float] = ..., waiting_for: _Optional[_Iterable[str]] = ..., detail: _Optional[str] = ...) -> None: ...

class GetNodeDevicesRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class VirtualFunction(_message.Message):
    __slots__ = ("minor", "bus_id")
    MINOR_FIELD_NUMBER: _ClassVar[int]
    BUS_ID_FIELD_NUMBER: _ClassVar[int]
    minor: int
    bus_id: str
    def __init__(self, minor: _Optional[int] = ..., bus_id: _Optional[str] = ...) -> None: ...

class DeviceHolder(_message.Message):
    __slots__ = ("pod", "resources", "vfs")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POD_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VFS_FIELD_NUMBER: _ClassVar[int]
    pod: str
    resources: _containers.ScalarMap[str, str]
    vfs: _containers.RepeatedCompositeFieldContainer[VirtualFunction]
    def __init__(self, pod: _Optional[str] = ..., resources: _Optional[_Mapping[str, str]] = ..., vfs: _Optional[_Iterable[_Union[VirtualFunction, _Mapping]]] = ...) -> None: ...

class DeviceUsage(_message.Message):
    __slots__ = ("type", "minor", "id", "healthy", "total", "free", "used", "holders", "pcie", "numa")
    class TotalEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class FreeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class UsedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    PCIE_FIELD_NUMBER: _ClassVar[int]
    NUMA_FIELD_NUMBER: _ClassVar[int]
    type: str
    minor: int
    id: str
    healthy: bool
    total: _containers.ScalarMap[str, str]
    free: _containers.ScalarMap[str, str]
    used: _containers.ScalarMap[str, str]
    holders: _containers.RepeatedCompositeFieldContainer[DeviceHolder]
    pcie: str
    numa: int
    def __init__(self, type: _Optional[str] = ..., minor: _Optional[int] = ..., id: _Optional[str] = ..., healthy: _Optional[bool] = ..., total: _Optional[_Mapping[str, str]] = ..., free: _Optional[_Mapping[str, str]] = ..., used: _Optional[_Mapping[str, str]] = ..., holders: _Optional[_Iterable[_Union[DeviceHolder, _Mapping]]] = ..., pcie: _Optional[str] = ..., numa: _Optional[int] = ...) -> None: ...

class NodeDevices(_message.Message):
    __slots__ = ("node", "devices")
    NODE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    node: str
    devices: _containers.RepeatedCompositeFieldContainer[DeviceUsage]
    def __init__(self, node: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[DeviceUsage, _Mapping]]] = ...) -> None: ...

class GetNodeDevicesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeDevices]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeDevices, _Mapping]]] = ...) -> None: ...

class ListPendingRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class PendingPod(_message.Message):
    __slots__ = ("pod", "uid", "queue", "attempts", "priority", "message", "plugins", "waiting_seconds", "backoff_seconds", "profile")
    POD_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    WAITING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    pod: str
    uid: str
    queue: str
    attempts: int
    priority: int
    message: str
    plugins: _containers.RepeatedScalarFieldContainer[str]
    waiting_seconds: float
    backoff_seconds: float
    profile: str
    def __init__(self, pod: _Optional[str] = ..., uid: _Optional[str] = ..., queue: _Optional[str] = ..., attempts: _Optional[int] = ..., priority: _Optional[int] = ..., message: _Optional[str] = ..., plugins: _Optional[_Iterable[str]] = ..., waiting_seconds: _Optional[float] = ..., backoff_seconds: _Optional[float] = ..., profile: _Optional[str] = ...) -> None: ...

class ListPendingResponse(_message.Message):
    __slots__ = ("pods", "leader")
    PODS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    pods: _containers.RepeatedCompositeFieldContainer[PendingPod]
    leader: bool
    def __init__(self, pods: _Optional[_Iterable[_Union[PendingPod, _Mapping]]] = ..., leader: _Optional[bool] = ...) -> None: ...

class PlanMigrationsRequest(_message.Message):
    __slots__ = ("namespace", "name", "pod_json", "max_migrations", "exclude")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POD_JSON_FIELD_NUMBER: _ClassVar[int]
    MAX_MIGRATIONS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    pod_json: str
    max_migrations: int
    exclude: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., pod_json: _Optional[str] = ..., max_migrations: _Optional[int] = ..., exclude: _Optional[_Iterable[str]] = ...) -> None: ...

class Migration(_message.Message):
    __slots__ = ("pod", "uid", "from_node", "to_node", "gpu_percent")
    POD_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    pod: str
    uid: str
    from_node: str
    to_node: str
    gpu_percent: int
    def __init__(self, pod: _Optional[str] = ..., uid: _Optional[str] = ..., from_node: _Optional[str] = ..., to_node: _Optional[str] = ..., gpu_percent: _Optional[int] = ...) -> None: ...

class PlanMigrationsResponse(_message.Message):
    __slots__ = ("feasible", "node", "migrations", "message", "freed_gpus")
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    MIGRATIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FREED_GPUS_FIELD_NUMBER: _ClassVar[int]
    feasible: bool
    node: str
    migrations: _containers.RepeatedCompositeFieldContainer[Migration]
    message: str
    freed_gpus: int
    def __init__(self, feasible: _Optional[bool] = ..., node: _Optional[str] = ..., migrations: _Optional[_Iterable[_Union[Migration, _Mapping]]] = ..., message: _Optional[str] = ..., freed_gpus: _Optional[int] = ...) -> None: ...
