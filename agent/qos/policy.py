"""QoS policy: from a pod and the NodeSLO, the cgroup settings its pod and containers should have.

Pure; the same plan feeds both enforcement paths — the hook plugin (returned to the runtime
proxy as LinuxContainerResources) and the reconciler (written to the cgroup files) — so the two
can never disagree. Rules, following kubelet for what kubelet also does and Koordinator for
the rest:

- CPU weight: shares = milli × 1024 / 1000 of the request (clamped to [2, 262144]); CPU limit:
  CFS quota = limit × period / 1000, none without a limit. The pod cgroup gets the pod's
  effective request (init containers, sidecars, overhead) and a limit only when every container
  has one, as kubelet computes it.
- BE pods that carry Koordinator's batch resources use `kubernetes.io/batch-cpu` (milli) and
  `kubernetes.io/batch-memory` (bytes) instead of cpu/memory: a BE pod without requests gets the
  minimum weight (2 shares), its quota from batch-cpu limits, its memory limit from batch-memory.
- `cpu.idle` = 1 on the pod cgroup when the class's cpuQOS is enabled with schedIdle=1 (BE by
  default); 0 otherwise, so a pod relabelled out of BE recovers.
- Memory QoS, when the class's memoryQOS is enabled: memory.min = request × minLimitPercent,
  memory.low = request × lowLimitPercent, memory.high = limit × throttlingPercent (no limit or 0
  → no throttling), never below min/low. Disabled → the neutral values (0, 0, max), so turning
  the feature off recovers the cgroups, as Koordinator does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.qos import convert
from agent.qos.config import ClassQoS, ResourceQoSConfig
from agent.qos.knobs import CPUMax
from apis.extension import names
from apis.extension.qos import KubeQoSClass, QoSClass, kube_qos_class, qos_class
from apis.k8s.core import Container, Pod

__all__ = ["CgroupSettings", "PodPlan", "plan"]


@dataclass(frozen=True, slots=True)
class CgroupSettings:
    """Desired values for one cgroup; None leaves a knob as it is. Memory in bytes (UNLIMITED = none)."""

    cpu_shares: int | None = None
    cpu_max: CPUMax | None = None
    cpu_idle: bool | None = None
    memory_max: int | None = None
    memory_min: int | None = None
    memory_low: int | None = None
    memory_high: int | None = None


@dataclass(frozen=True, slots=True)
class PodPlan:
    """What one pod's cgroups should hold: the pod cgroup, and each app container by name."""

    pod_key: str
    uid: str
    qos: QoSClass
    kube_qos: KubeQoSClass
    pod: CgroupSettings
    containers: Mapping[str, CgroupSettings] = field(default_factory=dict)
    #: bad input survived (an invalid qosClass label): worth a warning, never an exception.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Amounts:
    cpu_request: int  # milli
    cpu_limit: int  # milli; 0 = none
    memory_request: int  # bytes
    memory_limit: int  # bytes; 0 = none


def plan(pod: Pod, config: ResourceQoSConfig, *, period_us: int = convert.CFS_PERIOD_US) -> PodPlan:
    """The cgroup settings for `pod` under `config`. Pure and total: never raises for a valid Pod."""
    qos = qos_class(pod)
    class_qos = config.for_class(qos)
    cpu_name, memory_name = _resource_names(pod, qos)
    containers = {
        c.name: _settings(_container_amounts(c, cpu_name, memory_name), class_qos, period_us, idle=None)
        for c in pod.containers
    }
    idle = class_qos.cpu.enable and class_qos.cpu.sched_idle == 1
    pod_settings = _settings(_pod_amounts(pod, cpu_name, memory_name), class_qos, period_us, idle=idle)
    return PodPlan(pod.key, pod.uid, qos, kube_qos_class(pod), pod_settings, containers, _problems(pod, qos))


def _problems(pod: Pod, qos: QoSClass) -> tuple[str, ...]:
    label = pod.labels.get(names.LABEL_QOS_CLASS)
    if label is None or label == qos.value:
        return ()
    allowed = ", ".join(q.value for q in QoSClass)
    return (f"label {names.LABEL_QOS_CLASS}={label!r} is not one of {allowed}; using {qos.value} from kube QoS",)


def _resource_names(pod: Pod, qos: QoSClass) -> tuple[str, str]:
    """Which names carry CPU and memory: batch-* for BE pods that use them, else cpu/memory."""
    if qos is not QoSClass.BE:
        return names.CPU, names.MEMORY
    every = (*pod.containers, *pod.init_containers)
    uses_batch_cpu = any(names.BATCH_CPU in c.requests or names.BATCH_CPU in c.limits for c in every)
    uses_batch_memory = any(names.BATCH_MEMORY in c.requests or names.BATCH_MEMORY in c.limits for c in every)
    return (
        names.BATCH_CPU if uses_batch_cpu else names.CPU,
        names.BATCH_MEMORY if uses_batch_memory else names.MEMORY,
    )


def _container_amounts(c: Container, cpu: str, memory: str) -> _Amounts:
    return _Amounts(c.requests.get(cpu, 0), c.limits.get(cpu, 0), c.requests.get(memory, 0), c.limits.get(memory, 0))


def _pod_amounts(pod: Pod, cpu: str, memory: str) -> _Amounts:
    requests = pod.requests()
    return _Amounts(
        requests.get(cpu, 0),
        _pod_limit(pod, cpu),
        requests.get(memory, 0),
        _pod_limit(pod, memory),
    )


def _pod_limit(pod: Pod, name: str) -> int:
    """kubelet's pod-level limit: app containers + sidecars, at least any init container; 0 if any app lacks one."""
    apps = [c.limits.get(name, 0) for c in pod.containers]
    if not apps or any(limit <= 0 for limit in apps):
        return 0
    sidecars = sum(c.limits.get(name, 0) for c in pod.init_containers if c.restart_policy == "Always")
    init_peak = max((c.limits.get(name, 0) for c in pod.init_containers if c.restart_policy != "Always"), default=0)
    return max(sum(apps) + sidecars, init_peak) + pod.overhead.get(name, 0)


def _settings(amounts: _Amounts, class_qos: ClassQoS, period_us: int, *, idle: bool | None) -> CgroupSettings:
    memory_min, memory_low, memory_high = _memory_protection(amounts, class_qos)
    return CgroupSettings(
        cpu_shares=convert.milli_to_shares(amounts.cpu_request),
        cpu_max=CPUMax(convert.milli_to_quota(amounts.cpu_limit, period_us), period_us),
        cpu_idle=idle,
        memory_max=amounts.memory_limit if amounts.memory_limit > 0 else convert.UNLIMITED,
        memory_min=memory_min,
        memory_low=memory_low,
        memory_high=memory_high,
    )


def _memory_protection(amounts: _Amounts, class_qos: ClassQoS) -> tuple[int, int, int]:
    """(memory.min, memory.low, memory.high); the neutral (0, 0, max) when memory QoS is off."""
    mq = class_qos.memory
    if not mq.enable:
        return 0, 0, convert.UNLIMITED
    memory_min = convert.percent_of(amounts.memory_request, mq.min_limit_percent)
    memory_low = convert.percent_of(amounts.memory_request, mq.low_limit_percent)
    if mq.throttling_percent <= 0 or amounts.memory_limit <= 0:
        return memory_min, memory_low, convert.UNLIMITED
    memory_high = max(convert.percent_of(amounts.memory_limit, mq.throttling_percent), memory_min, memory_low)
    return memory_min, memory_low, memory_high
