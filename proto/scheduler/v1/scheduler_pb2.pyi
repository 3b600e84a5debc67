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
    __slots__ = ("pod_json",)
    POD_JSON_FIELD_NUMBER: _ClassVar[int]
    pod_json: str
    def __init__(self, pod_json: _Optional[str] = ...) -> None: ...

class ScheduleResponse(_message.Message):
    __slots__ = ("schedulable", "node", "annotations", "reasons", "message")
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
    schedulable: bool
    node: str
    annotations: _containers.ScalarMap[str, str]
    reasons: _containers.RepeatedCompositeFieldContainer[NodeReasons]
    message: str
    def __init__(self, schedulable: _Optional[bool] = ..., node: _Optional[str] = ..., annotations: _Optional[_Mapping[str, str]] = ..., reasons: _Optional[_Iterable[_Union[NodeReasons, _Mapping]]] = ..., message: _Optional[str] = ...) -> None: ...

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

class ExplainResponse(_message.Message):
    __slots__ = ("pod", "pending", "message", "nodes", "nearest")
    POD_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEAREST_FIELD_NUMBER: _ClassVar[int]
    pod: str
    pending: bool
    message: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeReasons]
    nearest: _containers.RepeatedCompositeFieldContainer[NearMiss]
    def __init__(self, pod: _Optional[str] = ..., pending: _Optional[bool] = ..., message: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[NodeReasons, _Mapping]]] = ..., nearest: _Optional[_Iterable[_Union[NearMiss, _Mapping]]] = ...) -> None: ...

class GetNodeDevicesRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class DeviceHolder(_message.Message):
    __slots__ = ("pod", "resources")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POD_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    pod: str
    resources: _containers.ScalarMap[str, str]
    def __init__(self, pod: _Optional[str] = ..., resources: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeviceUsage(_message.Message):
    __slots__ = ("type", "minor", "id", "healthy", "total", "free", "used", "holders")
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
    type: str
    minor: int
    id: str
    healthy: bool
    total: _containers.ScalarMap[str, str]
    free: _containers.ScalarMap[str, str]
    used: _containers.ScalarMap[str, str]
    holders: _containers.RepeatedCompositeFieldContainer[DeviceHolder]
    def __init__(self, type: _Optional[str] = ..., minor: _Optional[int] = ..., id: _Optional[str] = ..., healthy: _Optional[bool] = ..., total: _Optional[_Mapping[str, str]] = ..., free: _Optional[_Mapping[str, str]] = ..., used: _Optional[_Mapping[str, str]] = ..., holders: _Optional[_Iterable[_Union[DeviceHolder, _Mapping]]] = ...) -> None: ...

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
