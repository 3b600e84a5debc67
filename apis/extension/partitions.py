"""GPU partitions: the sets of GPUs a node lets one pod have, and what a pod asks of them.

Koordinator's protocol (its `apis/extension/device_share.go` and the DeviceShare plugin's
`allocator_gpu_helper.go`), restated:

- `scheduling.koordinator.sh/gpu-partitions` on a Device: GPU count -> the partitions of that
  many GPUs (`minors`, `gpuLinkType`, `ringBusBandwidth`, `allocationScore`). Written by the node
  side (koordlet from its vendor's P2P links; Tessera's agent from NVLink or the built-in table).
- `node.koordinator.sh/gpu-partition-policy`: `Honor` or `Prefer`; any other value, or none, is
  `Prefer`. Read from the Device's labels when the Device carries a table, else from the Node's.
- `scheduling.koordinator.sh/gpu-partition-spec` on a pod: `allocatePolicy` (`Restricted`: only
  the first tier of partitions; anything else, `BestEffort` the default: the first tier that has
  a free partition) and `ringBusBandwidth` (the least a partition must offer). Its presence alone
  makes the partitions binding for the pod, as `Honor` does for every pod of a node.
- A built-in table for NVIDIA Hopper 8-GPU nodes (the HGX SharedNVSwitch partitions: each GPU,
  the pairs 0-1 2-3 4-5 6-7, the halves 0-3 4-7, all eight), used when a node's Device has no
  table and the Node's `gpu-model` label is exactly `H100`, `H800` or `H20` (vendor `nvidia` or
  unset), as Koordinator matches it.

What Koordinator's decoder accepts is never refused here; what cannot be honoured safely is left
out with a sentence saying why (`decode_table`'s problems): a partition listed under a count its
minors do not match (Koordinator would give a pod more or fewer GPUs than it asked for), one
naming a GPU twice or a negative minor. Koordinator's tiers run in ascending `allocationScore`
(its code sorts them so, though its proposal says the highest score is best); Tessera follows the
code, so a table mixing scores is read the same by both schedulers.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis._annotation import load_json
from apis.errors import AnnotationError, QuantityError
from apis.extension import names
from apis.k8s import quantity
from apis.k8s.quantity import Quantity

__all__ = [
    "BUILTIN_MODELS",
    "HOPPER_TABLE",
    "NVLINK",
    "AllocatePolicy",
    "GPUPartition",
    "NodePartitions",
    "PartitionPolicy",
    "PartitionSpec",
    "PartitionTable",
    "builtin_table",
    "decode_spec",
    "decode_table",
    "encode_spec",
    "encode_table",
    "policy_from_labels",
    "resolve",
    "spec_from_annotations",
]

#: `gpuLinkType` of GPUs joined by NVLink (Koordinator's `GPUNVLink`).
NVLINK: Final = "NVLink"


class PartitionPolicy(enum.Enum):
    HONOR = "Honor"  # multi-GPU pods get one of the table's partitions, or do not fit
    PREFER = "Prefer"  # a free partition when there is one, else any GPUs


class AllocatePolicy(enum.Enum):
    RESTRICTED = "Restricted"  # only the first tier of partitions (Koordinator's order)
    BEST_EFFORT = "BestEffort"  # the first tier with a free partition


@dataclass(frozen=True, slots=True)
class GPUPartition:
    """GPUs that may go to one pod together. `minors` sorted, each once."""

    minors: tuple[int, ...]
    link_type: str = ""
    ring_bus_bandwidth: Quantity | None = None
    allocation_score: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minors": list(self.minors)}
        if self.link_type:
            out["gpuLinkType"] = self.link_type
        if self.ring_bus_bandwidth is not None:
            out["ringBusBandwidth"] = str(self.ring_bus_bandwidth)
        if self.allocation_score:
            out["allocationScore"] = self.allocation_score
        return out

    def __str__(self) -> str:
        return "[" + ",".join(str(m) for m in self.minors) + "]"


@dataclass(frozen=True, slots=True)
class PartitionTable:
    """GPU count -> its partitions, in the order written. Hashable (the scheduler keys memos by it)."""

    entries: tuple[tuple[int, tuple[GPUPartition, ...]], ...] = ()

    @classmethod
    def of(cls, by_count: Mapping[int, Iterable[GPUPartition]]) -> PartitionTable:
        return cls(tuple((n, tuple(by_count[n])) for n in sorted(by_count)))

    def sizes(self) -> tuple[int, ...]:
        return tuple(n for n, parts in self.entries if parts)

    def of_size(self, count: int) -> tuple[GPUPartition, ...] | None:
        """The partitions of `count` GPUs; None when the table has no entry for that count
        (Koordinator: "Unsupported number of GPU requests"), () for an empty entry."""
        for n, parts in self.entries:
            if n == count:
                return parts
        return None

    def tiers(self, count: int) -> tuple[tuple[GPUPartition, ...], ...]:
        """The partitions of `count` GPUs grouped by `allocationScore`, in Koordinator's order
        (ascending score), each group in table order."""
        groups: dict[int, list[GPUPartition]] = {}
        for p in self.of_size(count) or ():
            groups.setdefault(p.allocation_score, []).append(p)
        return tuple(tuple(groups[score]) for score in sorted(groups))


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """A pod's `gpu-partition-spec`."""

    allocate_policy: AllocatePolicy = AllocatePolicy.BEST_EFFORT
    ring_bus_bandwidth: Quantity | None = None

    @property
    def restricted(self) -> bool:
        return self.allocate_policy is AllocatePolicy.RESTRICTED


@dataclass(frozen=True, slots=True)
class NodePartitions:
    """What a node's partitions are for the scheduler: the table (None: the node has none) and
    whether it binds every pod (`Honor`). `source` says where the table came from, for reasons
    and `tessera explain`."""

    table: PartitionTable | None
    policy: PartitionPolicy
    source: str = ""

    @property
    def honor(self) -> bool:
        return self.policy is PartitionPolicy.HONOR

    def partition_of(self, minors: Iterable[int]) -> GPUPartition | None:
        """The partition of the table that is exactly these GPUs, or None."""
        if self.table is None:
            return None
        wanted = tuple(sorted(minors))
        return next((p for p in self.table.of_size(len(wanted)) or () if p.minors == wanted), None)

    def describe(self, minors: Iterable[int]) -> str:
        """The partition these GPUs are, with where the table came from and the node's policy
        (what what-if and the dashboard show); "" when they are none."""
        found = self.partition_of(minors)
        return f"{found} ({self.source}, {self.policy.value})" if found is not None else ""


# --- the built-in table ---------------------------------------------------------------------------
def _aligned(gpus: int, score: int = 1) -> PartitionTable:
    """Each GPU, then aligned runs of 2, 4, ... up to all `gpus` (a power of two)."""
    by_count: dict[int, list[GPUPartition]] = {}
    size = 1
    while size <= gpus:
        by_count[size] = [
            GPUPartition(tuple(range(start, start + size)), NVLINK, None, score) for start in range(0, gpus, size)
        ]
        size *= 2
    return PartitionTable.of(by_count)


#: Koordinator's `GPUPartitionIndexOfNVIDIAHopper`: 8 GPUs, every partition NVLink, score 1.
HOPPER_TABLE: Final = _aligned(8)
#: Values of `node.koordinator.sh/gpu-model` that get `HOPPER_TABLE` (Koordinator's exact match).
BUILTIN_MODELS: Final = frozenset({"H100", "H800", "H20"})


def builtin_table(vendor: str, model: str) -> PartitionTable | None:
    """The built-in table for a node's GPU vendor and model labels (an empty vendor counts as
    NVIDIA, as in Koordinator), or None."""
    if vendor in ("", names.GPU_VENDOR_NVIDIA) and model in BUILTIN_MODELS:
        return HOPPER_TABLE
    return None


def policy_from_labels(labels: Mapping[str, str]) -> PartitionPolicy:
    """`Honor` only when the label says exactly that; anything else is `Prefer` (Koordinator)."""
    if labels.get(names.LABEL_GPU_PARTITION_POLICY) == PartitionPolicy.HONOR.value:
        return PartitionPolicy.HONOR
    return PartitionPolicy.PREFER


def resolve(
    device_table: PartitionTable | None, device_labels: Mapping[str, str], node_labels: Mapping[str, str]
) -> NodePartitions | None:
    """Koordinator's choice for a node: the Device's table with the Device's policy label; else
    the built-in table for the Node's model with the Node's policy label. None when there is no
    table and nothing to honour (the node places GPUs as it would without partitions); a node
    labelled `Honor` without a table is kept, for it refuses every whole-GPU pod."""
    if device_table is not None:
        return NodePartitions(device_table, policy_from_labels(device_labels), "Device annotation")
    policy = policy_from_labels(node_labels)
    vendor, model = node_labels.get(names.LABEL_GPU_VENDOR, ""), node_labels.get(names.LABEL_GPU_MODEL, "")
    table = builtin_table(vendor, model)
    if table is None:
        return NodePartitions(None, policy, "") if policy is PartitionPolicy.HONOR else None
    return NodePartitions(table, policy, f"built-in table for {model}")


# --- codecs -----------------------------------------------------------------------------------------
def _int(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _bandwidth(key: str, raw: object, where: str, obj: str) -> Quantity | None:
    if raw is None:
        return None
    try:
        return quantity.parse(raw)
    except QuantityError as e:
        raise AnnotationError(key, f"{where}ringBusBandwidth: {e}", obj=obj) from None


def decode_table(text: str, *, obj: str = "") -> tuple[PartitionTable, tuple[str, ...]]:
    """Parse a Device's `gpu-partitions`: the table, and a sentence for each partition left out
    (module docstring). Raises AnnotationError where Koordinator's decoder fails too: not a JSON
    object (or `null`), a key that is not an integer, a value not a list of objects, `minors`
    not a list of integers, `allocationScore` not an integer, `gpuLinkType` not a string, a
    `ringBusBandwidth` that is not a quantity. Unknown fields are ignored, as in Go."""
    key = names.ANNOTATION_GPU_PARTITIONS
    doc: dict[str, Any] = load_json(key, text, obj, expect=dict, shape="a JSON object of GPU count -> partitions")
    by_count: dict[int, list[GPUPartition]] = {}
    problems: list[str] = []
    for count_text, raw_value in doc.items():
        digits = count_text[1:] if count_text.startswith("-") else count_text
        if not (digits.isascii() and digits.isdigit()):
            raise AnnotationError(key, f"key {count_text!r} is not a GPU count", obj=obj)
        count = int(count_text)
        raw_list = raw_value if raw_value is not None else []
        if not isinstance(raw_list, list):
            raise AnnotationError(key, f"{count_text}: expected a list of partitions", obj=obj)
        kept = by_count.setdefault(count, [])
        for i, raw in enumerate(raw_list):
            where = f"{count_text}[{i}]"
            if not isinstance(raw, dict):
                raise AnnotationError(key, f"{where}: expected an object", obj=obj)
            minors_raw = raw.get("minors") or []
            if not isinstance(minors_raw, list) or any(_int(m) is None for m in minors_raw):
                raise AnnotationError(key, f"{where}.minors: expected a list of GPU minors", obj=obj)
            score = raw.get("allocationScore", 0)
            if score is not None and _int(score) is None:
                raise AnnotationError(key, f"{where}.allocationScore: expected an integer", obj=obj)
            link = raw.get("gpuLinkType") or ""
            if not isinstance(link, str):
                raise AnnotationError(key, f"{where}.gpuLinkType: expected a string", obj=obj)
            bandwidth = _bandwidth(key, raw.get("ringBusBandwidth"), f"{where}.", obj)
            minors = tuple(sorted(set(minors_raw)))
            if len(minors) != len(minors_raw):
                problems.append(f"partition {where} names a GPU twice: left out")
            elif any(m < 0 for m in minors):
                problems.append(f"partition {where} names a negative GPU minor: left out")
            elif len(minors) != count:
                problems.append(f"partition {where} has {len(minors)} GPUs, not {count}: left out")
            else:
                kept.append(GPUPartition(minors, link, bandwidth, score or 0))
    return PartitionTable.of(by_count), tuple(problems)


def encode_table(table: PartitionTable) -> str:
    """Compact JSON, counts in order, so an unchanged node always writes the same text."""
    doc = {str(n): [p.to_dict() for p in parts] for n, parts in table.entries}
    return json.dumps(doc, separators=(",", ":"))


def decode_spec(text: str, *, obj: str = "") -> PartitionSpec:
    """Parse a pod's `gpu-partition-spec`. `null` is the default spec; an `allocatePolicy` other
    than `Restricted` is `BestEffort` (Koordinator compares with `Restricted` only). Raises
    AnnotationError where Koordinator's decoder fails: not JSON, not an object, a policy that is
    not a string, a `ringBusBandwidth` that is not a quantity."""
    key = names.ANNOTATION_GPU_PARTITION_SPEC
    if text.strip() == "null":
        return PartitionSpec()
    doc: dict[str, Any] = load_json(key, text, obj, expect=dict, shape="a JSON object")
    policy_raw = doc.get("allocatePolicy")
    if policy_raw is not None and not isinstance(policy_raw, str):
        raise AnnotationError(key, "allocatePolicy: expected Restricted or BestEffort", obj=obj)
    policy = AllocatePolicy.RESTRICTED if policy_raw == AllocatePolicy.RESTRICTED.value else AllocatePolicy.BEST_EFFORT
    return PartitionSpec(policy, _bandwidth(key, doc.get("ringBusBandwidth"), "", obj))


def encode_spec(spec: PartitionSpec) -> str:
    doc: dict[str, Any] = {"allocatePolicy": spec.allocate_policy.value}
    if spec.ring_bus_bandwidth is not None:
        doc["ringBusBandwidth"] = str(spec.ring_bus_bandwidth)
    return json.dumps(doc, separators=(",", ":"))


def spec_from_annotations(annotations: Mapping[str, str], *, obj: str = "") -> PartitionSpec | None:
    """The pod's spec, or None without the annotation. An empty value is malformed JSON, as for
    Koordinator (which rejects the pod)."""
    raw = annotations.get(names.ANNOTATION_GPU_PARTITION_SPEC)
    return decode_spec(raw, obj=obj) if raw is not None else None
