"""The node's QoS configuration: Koordinator's NodeSLO (or its slo-controller ConfigMap), parsed.

Koordinator configures koordlet with a `NodeSLO` object per node, which the slo-controller renders
from the `slo-controller-config` ConfigMap (JSON strings under `resource-threshold-config`,
`resource-qos-config`, `system-config`, each with a `clusterStrategy` and optional
`nodeStrategies`). The agent reads the node's NodeSLO object from the API server (`parse`, via
agent.qos.nodeslo) and accepts either shape as a YAML file (`load_file`), so a Koordinator
cluster's config works unchanged, and turns it once into frozen dataclasses; the policy, the
suppression loop and network QoS never see a dict.

Defaults are Koordinator's (`pkg/util/sloconfig`): every QoS feature is off until enabled;
`cpuSuppressThresholdPercent` 65; memory QoS percents 0; BE `schedIdle` 1 when CPU QoS is on.
One divergence: Koordinator's default `cpuSuppressPolicy` is `cpuset`, Tessera implements (and
defaults to) `cfsQuota`; `cpuset` is accepted and applied as `cfsQuota` with a warning.
Fields Koordinator has but Tessera does not apply (eviction thresholds, resctrl, blkio, memory
watermarks and page cache, group identity, ingress bandwidth, kernel sysctls) are accepted and
ignored — every field of Koordinator's NodeSLOSpec, so what its slo-controller renders parses —;
any other key is an error, so a typo does not silently disable a protection. Network rates
follow Koordinator's IntOrString: an integer is a percent, a string a quantity, 0 "not set".
See docs/qos.md.

Every problem found is reported at once in a `ConfigError` whose lines name the file, the
field path and the value.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from apis.errors import ConfigError, QuantityError, ValidationError
from apis.extension.qos import QoSClass
from apis.k8s import quantity
from apis.k8s.labels import LabelSelector

__all__ = [
    "Bandwidth",
    "CPUQoS",
    "CPUSuppressConfig",
    "ClassQoS",
    "MemoryQoS",
    "NetworkQoS",
    "QoSConfig",
    "ResourceQoSConfig",
    "SuppressPolicy",
    "SystemConfig",
    "load",
    "load_file",
    "parse",
]

# ConfigMap data keys (Koordinator's slo-controller-config).
_CM_THRESHOLD: Final = "resource-threshold-config"
_CM_QOS: Final = "resource-qos-config"
_CM_SYSTEM: Final = "system-config"

_SPEC_KEYS: Final = frozenset({"resourceUsedThresholdWithBE", "resourceQOSStrategy", "systemStrategy"})
_SPEC_IGNORED: Final = frozenset({"cpuBurstStrategy", "extensions", "hostApplications"})
_THRESHOLD_KEYS: Final = frozenset(
    {"enable", "cpuSuppressThresholdPercent", "cpuSuppressMinPercent", "cpuSuppressPolicy"}
)
_THRESHOLD_IGNORED: Final = frozenset(
    {
        "memoryEvictThresholdPercent",
        "memoryEvictLowerPercent",
        "cpuEvictBESatisfactionUpperPercent",
        "cpuEvictBESatisfactionLowerPercent",
        "cpuEvictBEUsageThresholdPercent",
        "cpuEvictTimeWindowSeconds",
        "cpuEvictThresholdPercent",
        "cpuEvictLowerPercent",
        "cpuAllocatableEvictThresholdPercent",
        "cpuAllocatableEvictLowerPercent",
        "memoryAllocatableEvictThresholdPercent",
        "memoryAllocatableEvictLowerPercent",
        "cpuEvictPolicy",
        "evictEnabledPriorityThreshold",
        "allocatableEvictPriorityThreshold",
    }
)
_STRATEGY_CLASSES: Final = {"lsrClass": "lsr", "lsClass": "ls", "beClass": "be", "systemClass": "system"}
_STRATEGY_IGNORED: Final = frozenset({"policies", "cgroupRoot"})
_CLASS_IGNORED: Final = frozenset({"resctrlQOS", "blkioQOS"})
_CPU_KEYS: Final = frozenset({"enable", "groupIdentity", "schedIdle"})
_CPU_IGNORED: Final = frozenset({"coreExpeller"})
_MEMORY_KEYS: Final = frozenset({"enable", "minLimitPercent", "lowLimitPercent", "throttlingPercent"})
_MEMORY_IGNORED: Final = frozenset(
    {
        "wmarkRatio",
        "wmarkScalePermill",
        "wmarkMinAdj",
        "priorityEnable",
        "priority",
        "oomKillGroup",
        "pageCacheEnable",
        "pageCacheLimitPercent",
        "pageCacheLimitSize",
        "pageCacheReclaimSync",
    }
)
_NETWORK_KEYS: Final = frozenset({"enable", "ingressRequest", "ingressLimit", "egressRequest", "egressLimit"})
_SYSTEM_KEYS: Final = frozenset({"totalNetworkBandwidth"})
_SYSTEM_IGNORED: Final = frozenset(
    {
        "minFreeKbytesFactor",
        "watermarkScaleFactor",
        "memcgReapBackGround",
        "schedGroupIdentityEnabled",
        "schedIdleSaverWmark",
        "schedFeatures",
        "pageCacheLimitEnabled",
    }
)
_PROFILE_KEYS: Final = frozenset({"name", "nodeSelector"})


class SuppressPolicy(enum.Enum):
    CFS_QUOTA = "cfsQuota"
    CPUSET = "cpuset"  # accepted for compatibility; applied as cfsQuota


@dataclass(frozen=True, slots=True)
class CPUSuppressConfig:
    """`resourceUsedThresholdWithBE`: how much of the node BE may use (see agent.qos.suppress)."""

    enable: bool = False
    threshold_percent: int = 65
    #: floor for BE, in percent of node CPU; None → Koordinator's 2 ms per 100 ms period.
    min_percent: int | None = None
    policy: SuppressPolicy = SuppressPolicy.CFS_QUOTA


@dataclass(frozen=True, slots=True)
class CPUQoS:
    enable: bool = False
    #: Anolis group identity (bvt); parsed for compatibility, not applied.
    group_identity: int = 0
    #: 1 → cpu.idle=1 on the class's pod cgroups (and the BestEffort QoS cgroup for BE).
    sched_idle: int = 0


@dataclass(frozen=True, slots=True)
class MemoryQoS:
    enable: bool = False
    #: memory.min = request × minLimitPercent / 100 (0 disables).
    min_limit_percent: int = 0
    #: memory.low = request × lowLimitPercent / 100 (0 disables).
    low_limit_percent: int = 0
    #: memory.high = limit × throttlingPercent / 100 (0 disables; no limit → no throttling).
    throttling_percent: int = 0


@dataclass(frozen=True, slots=True)
class Bandwidth:
    """A rate given as a percent of the node's total bandwidth, or absolute in bits per second."""

    percent: int | None = None
    bps: int | None = None

    def resolve(self, total_bps: int) -> int:
        if self.percent is not None:
            return total_bps * self.percent // 100
        return self.bps or 0


@dataclass(frozen=True, slots=True)
class NetworkQoS:
    enable: bool = False
    egress_request: Bandwidth | None = None
    egress_limit: Bandwidth | None = None
    #: ingress shaping needs an IFB device; parsed, not applied.
    ingress_request: Bandwidth | None = None
    ingress_limit: Bandwidth | None = None


@dataclass(frozen=True, slots=True)
class ClassQoS:
    cpu: CPUQoS = field(default_factory=CPUQoS)
    memory: MemoryQoS = field(default_factory=MemoryQoS)
    network: NetworkQoS = field(default_factory=NetworkQoS)


#: Koordinator's per-class defaults (DefaultCPUQOS): everything off; BE idles when CPU QoS is on.
_DEFAULT_CLASSES: Final[Mapping[str, ClassQoS]] = {
    "lsr": ClassQoS(cpu=CPUQoS(group_identity=2)),
    "ls": ClassQoS(cpu=CPUQoS(group_identity=2)),
    "be": ClassQoS(cpu=CPUQoS(group_identity=-1, sched_idle=1)),
    "system": ClassQoS(),
}


@dataclass(frozen=True, slots=True)
class ResourceQoSConfig:
    """`resourceQOSStrategy`: per-class CPU, memory and network QoS. LSE follows lsrClass."""

    lsr: ClassQoS = _DEFAULT_CLASSES["lsr"]
    ls: ClassQoS = _DEFAULT_CLASSES["ls"]
    be: ClassQoS = _DEFAULT_CLASSES["be"]
    system: ClassQoS = _DEFAULT_CLASSES["system"]

    def for_class(self, qos: QoSClass) -> ClassQoS:
        if qos in (QoSClass.LSE, QoSClass.LSR):
            return self.lsr
        if qos is QoSClass.LS:
            return self.ls
        if qos is QoSClass.BE:
            return self.be
        return self.system


@dataclass(frozen=True, slots=True)
class SystemConfig:
    #: node egress bandwidth in bits/s; None → the interface's speed.
    total_network_bandwidth_bps: int | None = None


@dataclass(frozen=True, slots=True)
class QoSConfig:
    """Everything QoS reads from the NodeSLO. `QoSConfig()` is Koordinator's default (all off)."""

    cpu_suppress: CPUSuppressConfig = field(default_factory=CPUSuppressConfig)
    resource_qos: ResourceQoSConfig = field(default_factory=ResourceQoSConfig)
    system: SystemConfig = field(default_factory=SystemConfig)


def load_file(path: Path | str, *, node_labels: Mapping[str, str] | None = None) -> QoSConfig:
    """Read and parse a NodeSLO / ConfigMap YAML file. Raises ConfigError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read QoS config: {e.strerror}") from e
    return load(text, source=str(path), node_labels=node_labels)


def load(text: str, *, source: str = "<qos config>", node_labels: Mapping[str, str] | None = None) -> QoSConfig:
    """Parse YAML text: a NodeSLO (`kind: NodeSLO`), a ConfigMap (`kind: ConfigMap`), or a bare spec.

    For a ConfigMap, the first `nodeStrategies` entry whose `nodeSelector` matches `node_labels`
    is merged over `clusterStrategy`, as the slo-controller does. Raises ConfigError listing
    every problem, each as `<source>: <field path>: <reason>`.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {e}") from e
    return parse({} if doc is None else doc, source=source, node_labels=node_labels)


def parse(doc: object, *, source: str, node_labels: Mapping[str, str] | None = None) -> QoSConfig:
    """Parse a decoded document (a NodeSLO object as the API server returns it, a ConfigMap, a bare
    spec), as `load` does for text. Raises ConfigError listing every problem."""
    parser = _Parser(source)
    config = parser.document(doc, dict(node_labels or {}))
    if parser.errors:
        raise ConfigError(f"{source}: invalid QoS config:\n  " + "\n  ".join(parser.errors))
    return config


class _Parser:
    """Reads one document, collecting every problem instead of stopping at the first."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[str] = []

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(f"{path or '<root>'}: {reason}")

    # --- documents -------------------------------------------------------------------------------------

    def document(self, doc: object, node_labels: dict[str, str]) -> QoSConfig:
        d = self.mapping(doc, "")
        kind = d.get("kind")
        if kind == "ConfigMap":
            return self.configmap(d, node_labels)
        if kind not in (None, "NodeSLO"):
            self.fail("kind", f"expected NodeSLO or ConfigMap, got {kind!r}")
            return QoSConfig()
        if kind == "NodeSLO":
            return self.spec(d.get("spec"), "spec")
        return self.spec(d, "")

    def spec(self, raw: object, path: str) -> QoSConfig:
        d = self.mapping(raw, path)
        self.known(d, path, _SPEC_KEYS, _SPEC_IGNORED | ({"apiVersion", "kind", "metadata"} if not path else set()))
        return QoSConfig(
            cpu_suppress=self.threshold(
                d.get("resourceUsedThresholdWithBE"), _join(path, "resourceUsedThresholdWithBE")
            ),
            resource_qos=self.strategy(d.get("resourceQOSStrategy"), _join(path, "resourceQOSStrategy")),
            system=self.system(d.get("systemStrategy"), _join(path, "systemStrategy")),
        )

    def configmap(self, d: Mapping[str, object], node_labels: dict[str, str]) -> QoSConfig:
        data = self.mapping(d.get("data"), "data")
        sections: dict[str, tuple[object, str]] = {}
        for key in (_CM_THRESHOLD, _CM_QOS, _CM_SYSTEM):
            if key in data:
                sections[key] = self.configmap_section(data[key], f"data.{key}", node_labels)
        threshold, threshold_path = sections.get(_CM_THRESHOLD, (None, ""))
        qos, qos_path = sections.get(_CM_QOS, (None, ""))
        system, system_path = sections.get(_CM_SYSTEM, (None, ""))
        return QoSConfig(
            cpu_suppress=self.threshold(threshold, threshold_path),
            resource_qos=self.strategy(qos, qos_path),
            system=self.system(system, system_path),
        )

    def configmap_section(self, raw: object, path: str, node_labels: dict[str, str]) -> tuple[object, str]:
        """A JSON string with clusterStrategy (+ nodeStrategies): the strategy for this node."""
        if not isinstance(raw, str):
            self.fail(path, f"expected a JSON string, got {type(raw).__name__}")
            return None, path
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as e:
            self.fail(path, f"not valid JSON: {e}")
            return None, path
        d = self.mapping(doc, path)
        strategy = self.mapping(d.get("clusterStrategy"), f"{path}.clusterStrategy")
        chosen_path = f"{path}.clusterStrategy"
        for i, node in enumerate(self.sequence(d.get("nodeStrategies"), f"{path}.nodeStrategies")):
            npath = f"{path}.nodeStrategies[{i}]"
            nd = self.mapping(node, npath)
            try:
                selector = LabelSelector.from_dict(nd.get("nodeSelector"), f"{npath}.nodeSelector")
            except ValidationError as e:
                self.fail(npath, str(e))
                continue
            if selector.matches(node_labels):
                overrides = {k: v for k, v in nd.items() if k not in _PROFILE_KEYS}
                return _merge(strategy, overrides), npath
        return strategy, chosen_path

    # --- sections ----------------------------------------------------------------------------------------

    def threshold(self, raw: object, path: str) -> CPUSuppressConfig:
        d = self.mapping(raw, path)
        self.known(d, path, _THRESHOLD_KEYS, _THRESHOLD_IGNORED)
        default = CPUSuppressConfig()
        policy_text = self.string(d, "cpuSuppressPolicy", path, default.policy.value)
        try:
            policy = SuppressPolicy(policy_text)
        except ValueError:
            self.fail(_join(path, "cpuSuppressPolicy"), f"must be cfsQuota or cpuset, got {policy_text!r}")
            policy = default.policy
        min_percent = self.percent(d, "cpuSuppressMinPercent", path, None)
        return CPUSuppressConfig(
            enable=self.boolean(d, "enable", path, default.enable),
            threshold_percent=self.percent(d, "cpuSuppressThresholdPercent", path, default.threshold_percent) or 0,
            min_percent=min_percent,
            policy=policy,
        )

    def strategy(self, raw: object, path: str) -> ResourceQoSConfig:
        d = self.mapping(raw, path)
        self.known(d, path, frozenset(_STRATEGY_CLASSES), _STRATEGY_IGNORED)
        classes = {
            attr: self.qos_class(d.get(key), _join(path, key), _DEFAULT_CLASSES[attr])
            for key, attr in _STRATEGY_CLASSES.items()
        }
        return ResourceQoSConfig(**classes)

    def qos_class(self, raw: object, path: str, default: ClassQoS) -> ClassQoS:
        d = self.mapping(raw, path)
        self.known(d, path, frozenset({"cpuQOS", "memoryQOS", "networkQOS"}), _CLASS_IGNORED)
        cpu_path, mem_path, net_path = _join(path, "cpuQOS"), _join(path, "memoryQOS"), _join(path, "networkQOS")
        cpu = self.mapping(d.get("cpuQOS"), cpu_path)
        self.known(cpu, cpu_path, _CPU_KEYS, _CPU_IGNORED)
        mem = self.mapping(d.get("memoryQOS"), mem_path)
        self.known(mem, mem_path, _MEMORY_KEYS, _MEMORY_IGNORED)
        net = self.mapping(d.get("networkQOS"), net_path)
        self.known(net, net_path, _NETWORK_KEYS, frozenset())
        sched_idle = self.integer(cpu, "schedIdle", cpu_path, default.cpu.sched_idle)
        if sched_idle not in (0, 1):
            self.fail(_join(cpu_path, "schedIdle"), f"must be 0 or 1, got {sched_idle}")
        return ClassQoS(
            cpu=CPUQoS(
                enable=self.boolean(cpu, "enable", cpu_path, default.cpu.enable),
                group_identity=self.integer(cpu, "groupIdentity", cpu_path, default.cpu.group_identity),
                sched_idle=sched_idle,
            ),
            memory=MemoryQoS(
                enable=self.boolean(mem, "enable", mem_path, default.memory.enable),
                min_limit_percent=self.percent(mem, "minLimitPercent", mem_path, 0) or 0,
                low_limit_percent=self.percent(mem, "lowLimitPercent", mem_path, 0) or 0,
                throttling_percent=self.percent(mem, "throttlingPercent", mem_path, 0) or 0,
            ),
            network=NetworkQoS(
                enable=self.boolean(net, "enable", net_path, default.network.enable),
                egress_request=self.bandwidth(net, "egressRequest", net_path),
                egress_limit=self.bandwidth(net, "egressLimit", net_path),
                ingress_request=self.bandwidth(net, "ingressRequest", net_path),
                ingress_limit=self.bandwidth(net, "ingressLimit", net_path),
            ),
        )

    def system(self, raw: object, path: str) -> SystemConfig:
        d = self.mapping(raw, path)
        self.known(d, path, _SYSTEM_KEYS, _SYSTEM_IGNORED)
        raw_total = d.get("totalNetworkBandwidth")
        if isinstance(raw_total, str) and raw_total.endswith("%"):
            self.fail(_join(path, "totalNetworkBandwidth"), "must be an absolute rate (bits/s), not a percent")
            return SystemConfig()
        total = self.rate(d, "totalNetworkBandwidth", path)
        return SystemConfig(total_network_bandwidth_bps=total.bps if total is not None else None)

    # --- fields ------------------------------------------------------------------------------------------

    def mapping(self, raw: object, path: str) -> Mapping[str, object]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
            self.fail(path, f"expected a mapping, got {type(raw).__name__}")
            return {}
        return raw

    def sequence(self, raw: object, path: str) -> list[object]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.fail(path, f"expected a list, got {type(raw).__name__}")
            return []
        return raw

    def known(
        self, d: Mapping[str, object], path: str, keys: frozenset[str], ignored: frozenset[str] | set[str]
    ) -> None:
        for key in sorted(set(d) - keys - ignored):
            self.fail(_join(path, key), "unknown field")

    def boolean(self, d: Mapping[str, object], key: str, path: str, default: bool) -> bool:
        value = d.get(key, default)
        if not isinstance(value, bool):
            self.fail(_join(path, key), f"must be true or false, got {value!r}")
            return default
        return value

    def integer(self, d: Mapping[str, object], key: str, path: str, default: int) -> int:
        value = d.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(_join(path, key), f"must be an integer, got {value!r}")
            return default
        return value

    def percent(self, d: Mapping[str, object], key: str, path: str, default: int | None) -> int | None:
        if key not in d or d[key] is None:
            return default
        value = self.integer(d, key, path, default if default is not None else 0)
        if not 0 <= value <= 100:
            self.fail(_join(path, key), f"must be a percent in 0..100, got {value}")
            return default
        return value

    def string(self, d: Mapping[str, object], key: str, path: str, default: str) -> str:
        value = d.get(key, default)
        if not isinstance(value, str):
            self.fail(_join(path, key), f"must be a string, got {value!r}")
            return default
        return value

    def bandwidth(self, d: Mapping[str, object], key: str, path: str) -> Bandwidth | None:
        """A class's rate, as Koordinator's IntOrString: an integer or `"50%"` is a percent of the
        node's bandwidth, a string like `"100M"` a rate in bits/s (a Kubernetes quantity). Zero in
        any form (Koordinator renders an unset rate as 0) is None: not set."""
        if key not in d or d[key] is None:
            return None
        value = d[key]
        where = _join(path, key)
        if isinstance(value, int) and not isinstance(value, bool):
            return self.bandwidth_percent(where, value, value)
        if isinstance(value, str) and value.endswith("%"):
            try:
                percent = int(value[:-1])
            except ValueError:
                percent = -1
            return self.bandwidth_percent(where, percent, value)
        return self.rate(d, key, path)

    def bandwidth_percent(self, where: str, percent: int, value: object) -> Bandwidth | None:
        if not 0 <= percent <= 100:
            self.fail(where, f'must be a percent in 0..100 (50 or "50%") or a rate in bits/s, got {value!r}')
            return None
        return Bandwidth(percent=percent) if percent else None

    def rate(self, d: Mapping[str, object], key: str, path: str) -> Bandwidth | None:
        """An absolute rate in bits/s: a Kubernetes quantity (`"100M"`) or an integer; 0 is None (not set)."""
        if key not in d or d[key] is None:
            return None
        value = d[key]
        where = _join(path, key)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(where, f'must be a percent ("50%") or a rate in bits/s ("100M"), got {value!r}')
            return None
        try:
            bps = quantity.parse(value).value()
        except QuantityError as e:
            self.fail(where, f'must be a percent ("50%") or a rate in bits/s ("100M"): {e.reason} (got {value!r})')
            return None
        if bps < 0:
            self.fail(where, f"must be >= 0 bits/s (0: not set), got {value!r}")
            return None
        return Bandwidth(bps=bps) if bps else None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _merge(base: Mapping[str, object], override: Mapping[str, object]) -> dict[str, object]:
    """Deep merge of JSON objects: override's leaves win, nested objects merge."""
    out = dict(base)
    for key, value in override.items():
        prior = out.get(key)
        if isinstance(prior, Mapping) and isinstance(value, Mapping):
            out[key] = _merge(prior, value)
        else:
            out[key] = value
    return out
