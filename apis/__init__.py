"""Tessera's protocol in Python, split by role as Koordinator splits its `apis/`. Pure; no I/O.

    apis.k8s        Kubernetes' own shapes: Pod/Node views, ObjectMeta, label selectors,
                    quantities, resource lists in base units
    apis.crds       our custom resources: Device, ElasticQuota, PodGroup
    apis.extension  the Koordinator protocol on top: resource, label and annotation names, the
                    device-allocated / allocate-hint / gang / quota codecs, QoS classes and the
                    device-request rules
    apis.errors     the typed errors every layer raises

Everything else imports this package; it imports nothing of ours (checked by `lint-imports`).
Modules are imported and qualified (`from apis.k8s import quantity; quantity.parse("8Gi")`); the
names below are the types most callers need.
"""

from apis.crds.device import Device, DeviceInfo, DeviceTopology, DeviceType, VirtualFunction, VirtualFunctionGroup
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.errors import (
    AnnotationError,
    ConfigError,
    DiscoveryError,
    InvalidRequestError,
    QuantityError,
    TesseraError,
    ValidationError,
)
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.extension.devicerequest import DeviceRequest
from apis.extension.qos import QoSClass
from apis.k8s.core import Container, Node, Pod, Taint, Toleration
from apis.k8s.meta import Condition, ObjectMeta, OwnerReference
from apis.k8s.quantity import Quantity

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
]
