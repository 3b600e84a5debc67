"""Tessera's protocol in Python: names, CRD types, codecs and request rules. Pure; no I/O.

Everything else imports this package; it imports nothing of ours (checked by `lint-imports`).
Modules are imported and qualified (`from apis import quantity; quantity.parse("8Gi")`); the
names below are the types most callers need.
"""

from apis import allocation, devicerequest, gang, hints, labels, names, qos, quantity, quota, resources
from apis.allocation import DeviceAllocation, VFAllocation
from apis.core import Container, Node, Pod, Taint, Toleration
from apis.device import Device, DeviceInfo, DeviceTopology, DeviceType, VirtualFunction, VirtualFunctionGroup
from apis.devicerequest import DeviceRequest
from apis.elasticquota import ElasticQuota
from apis.errors import (
    AnnotationError,
    ConfigError,
    DiscoveryError,
    InvalidRequestError,
    QuantityError,
    TesseraError,
    ValidationError,
)
from apis.meta import Condition, ObjectMeta, OwnerReference
from apis.podgroup import PodGroup, PodGroupPhase
from apis.qos import QoSClass
from apis.quantity import Quantity

__all__ = [
    "AnnotationError",
    "Condition",
    "ConfigError",
    "Container",
    "Device",
    "DeviceAllocation",
    "DeviceInfo",
    "DeviceRequest",
    "DeviceTopology",
    "DeviceType",
    "DiscoveryError",
    "ElasticQuota",
    "InvalidRequestError",
    "Node",
    "ObjectMeta",
    "OwnerReference",
    "Pod",
    "PodGroup",
    "PodGroupPhase",
    "QoSClass",
    "Quantity",
    "QuantityError",
    "Taint",
    "TesseraError",
    "Toleration",
    "VFAllocation",
    "ValidationError",
    "VirtualFunction",
    "VirtualFunctionGroup",
    "allocation",
    "devicerequest",
    "gang",
    "hints",
    "labels",
    "names",
    "qos",
    "quantity",
    "quota",
    "resources",
]
