"""Arguments of DeviceShare: how devices and nodes are scored, which placement policy runs, which
GPUs must not be shared (Koordinator's `gpuShareUnsupportedModels`) and where the GPU
shared-resource templates are (`gpuSharedResourceTemplatesConfig`). Every problem is reported at
startup, at once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.errors import ConfigError
from apis.extension import names
from scheduler import fragmentation
from scheduler.framework.scoring import ScoringStrategy, ScoringStrategyType, parse_scoring_strategy
from scheduler.plugins.deviceshare.allocator import POLICIES, FragmentationAwarePolicy

#: The protocol's default: LeastAllocated over memory (both forms), RDMA and FPGA, weight 1 each.
DEFAULT_SCORING = ScoringStrategy(
    ScoringStrategyType.LEAST_ALLOCATED,
    ((names.GPU_MEMORY_RATIO, 1), (names.GPU_MEMORY, 1), (names.RDMA, 1), (names.FPGA, 1)),
)
_KEYS = frozenset(
    {
        "scoringStrategy",
        "allocationPolicy",
        "targetWorkload",
        "gpuShareUnsupportedModels",
        "gpuSharedResourceTemplatesConfig",
    }
)
_MODEL_KEYS = frozenset({"vendor", "model"})
_TEMPLATES_KEYS = frozenset({"configMapNamespace", "configMapName", "matchedResources"})
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True, slots=True)
class SharedResourceTemplatesConfig:
    """`gpuSharedResourceTemplatesConfig`: where the GPU shared-resource templates are, and which
    requests must match one (`apis.extension.sharedtemplates`). Koordinator's defaults."""

    namespace: str = "koordinator-system"
    name: str = "gpu-shared-resource-templates"
    #: A shared-GPU pod asking for any of these per GPU must match a template exactly.
    matched_resources: frozenset[str] = frozenset({names.HUAWEI_NPU_CORE})

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    scoring: ScoringStrategy = DEFAULT_SCORING
    #: FragmentationAware by default, with GPUFragmentation ranking nodes (the default profile).
    allocation_policy: str = FragmentationAwarePolicy.name
    #: What a policy that measures fragmentation measures it against (learned by default).
    workload: fragmentation.WorkloadArgs = field(default_factory=fragmentation.WorkloadArgs)
    #: `gpuShareUnsupportedModels`: (vendor, model) pairs, as the node labels
    #: `node.koordinator.sh/gpu-vendor` and `gpu-model` spell them, whose GPUs are never shared: a
    #: pod asking for a share of a GPU does not go to such a node.
    share_unsupported_models: frozenset[tuple[str, str]] = frozenset()
    #: `gpuSharedResourceTemplatesConfig`; a field left out keeps Koordinator's default.
    shared_templates: SharedResourceTemplatesConfig = field(default_factory=SharedResourceTemplatesConfig)

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> DeviceShareArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        scoring = parse_scoring_strategy(
            raw.get("scoringStrategy"), default=DEFAULT_SCORING, where="scoringStrategy", problems=problems
        )
        policy = raw.get("allocationPolicy", FragmentationAwarePolicy.name)
        if policy not in POLICIES:
            problems.append(f"allocationPolicy: {policy!r} is not one of {', '.join(sorted(POLICIES))}")
        workload = fragmentation.parse_workload_args(
            raw.get("targetWorkload"), where="targetWorkload", problems=problems
        )
        users = sorted(name for name, factory in POLICIES.items() if factory(scoring).uses_workload)
        if "targetWorkload" in raw and policy in POLICIES and policy not in users:
            problems.append(f"targetWorkload: only used by allocationPolicy {' or '.join(users)}, not {policy}")
        unsupported = _unsupported_models(raw.get("gpuShareUnsupportedModels"), problems)
        templates = _templates_config(raw.get("gpuSharedResourceTemplatesConfig"), problems)
        if problems:
            raise ConfigError("; ".join(problems))
        assert isinstance(policy, str)
        return cls(scoring, policy, workload, unsupported, templates)


def _unsupported_models(raw: object, problems: list[str]) -> frozenset[tuple[str, str]]:
    """`[{vendor: huawei, model: Ascend-310P3-300I-DUO}, ...]` as Koordinator's
    `GPUShareUnsupportedModel` list; every entry names both."""
    where = "gpuShareUnsupportedModels"
    if raw is None:
        return frozenset()
    if not isinstance(raw, list):
        problems.append(f"{where}: expected a list of {{vendor, model}}")
        return frozenset()
    out = set()
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            problems.append(f"{where}[{i}]: expected {{vendor, model}}")
            continue
        unknown = sorted(str(k) for k in entry if k not in _MODEL_KEYS)
        if unknown:
            problems.append(f"{where}[{i}]: unknown field {', '.join(unknown)} (allowed: model, vendor)")
        vendor, model = entry.get("vendor"), entry.get("model")
        if not isinstance(vendor, str) or not vendor or not isinstance(model, str) or not model:
            problems.append(f"{where}[{i}]: vendor and model must both be non-empty strings, got {dict(entry)!r}")
            continue
        out.add((vendor, model))
    return frozenset(out)


def _templates_config(raw: object, problems: list[str]) -> SharedResourceTemplatesConfig:
    where = "gpuSharedResourceTemplatesConfig"
    default = SharedResourceTemplatesConfig()
    if raw is None:
        return default
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected {{configMapNamespace, configMapName, matchedResources}}")
        return default
    unknown = sorted(str(k) for k in raw if k not in _TEMPLATES_KEYS)
    if unknown:
        problems.append(f"{where}: unknown field {', '.join(unknown)} (allowed: {', '.join(sorted(_TEMPLATES_KEYS))})")
    namespace = raw.get("configMapNamespace", default.namespace)
    if not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace):
        problems.append(f"{where}.configMapNamespace: {namespace!r} is not a namespace name (a DNS-1123 label)")
    name = raw.get("configMapName", default.name)
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        problems.append(f"{where}.configMapName: {name!r} is not a ConfigMap name (a DNS-1123 subdomain)")
    matched = raw.get("matchedResources", sorted(default.matched_resources))
    if not isinstance(matched, list) or not all(isinstance(m, str) and m for m in matched):
        problems.append(f"{where}.matchedResources: expected a list of resource names, got {matched!r}")
        matched = []
    return SharedResourceTemplatesConfig(str(namespace), str(name), frozenset(matched))
