"""QoS classes: Koordinator's (LSE, LSR, LS, BE, SYSTEM) and the Kubernetes ones they default from.

A pod's Koordinator class comes from its `koordinator.sh/qosClass` label; without one it follows
the Kubernetes QoS class: Guaranteed → LSR, Burstable → LS, BestEffort → BE.
"""

from __future__ import annotations

import enum

from apis.extension import names
from apis.k8s.core import Pod

__all__ = ["KubeQoSClass", "QoSClass", "kube_qos_class", "qos_class"]


class QoSClass(enum.Enum):
    LSE = "LSE"  # latency-sensitive exclusive: dedicated CPUs, never shared
    LSR = "LSR"  # latency-sensitive reserved: bound CPUs
    LS = "LS"  # latency-sensitive: shared pool, protected from BE
    BE = "BE"  # best effort: uses what LS leaves, suppressed first
    SYSTEM = "SYSTEM"  # node system daemons


class KubeQoSClass(enum.Enum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


_DEFAULT_FROM_KUBE = {
    KubeQoSClass.GUARANTEED: QoSClass.LSR,
    KubeQoSClass.BURSTABLE: QoSClass.LS,
    KubeQoSClass.BEST_EFFORT: QoSClass.BE,
}
_COMPUTE = (names.CPU, names.MEMORY)


def kube_qos_class(pod: Pod) -> KubeQoSClass:
    """Kubernetes' QoS class: status.qosClass when set, else computed as kubelet does."""
    if pod.status_qos_class:
        try:
            return KubeQoSClass(pod.status_qos_class)
        except ValueError:
            pass  # an unknown value: compute it ourselves
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in (*pod.containers, *pod.init_containers):
        for name in _COMPUTE:
            if c.requests.get(name, 0) > 0:
                requests[name] = requests.get(name, 0) + c.requests[name]
            if c.limits.get(name, 0) > 0:
                limits[name] = limits.get(name, 0) + c.limits[name]
        if not all(c.limits.get(name, 0) > 0 for name in _COMPUTE):
            guaranteed = False
    if not requests and not limits:
        return KubeQoSClass.BEST_EFFORT
    if guaranteed and requests == limits:
        return KubeQoSClass.GUARANTEED
    return KubeQoSClass.BURSTABLE


def qos_class(pod: Pod) -> QoSClass:
    """The pod's Koordinator QoS class: its label if valid, else the default from kube QoS."""
    label = pod.labels.get(names.LABEL_QOS_CLASS, "")
    try:
        return QoSClass(label)
    except ValueError:
        return _DEFAULT_FROM_KUBE[kube_qos_class(pod)]
