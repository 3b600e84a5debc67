"""DynamicResources: a pod's ResourceClaims (`resource.k8s.io/v1`) allocated as kube-scheduler's
plugin of that name allocates them — with DeviceShare's placement preferences and on one ledger
with Koordinator-protocol pods.

- PreFilter resolves the pod's claims: `resourceClaimName`, or the claim generated for a template
  as the pod's `status.resourceClaimStatuses` records it. A template's claim not made yet, a
  claim not found, being deleted, or generated for another pod makes the pod wait
  (UnschedulableAndUnresolvable, until a claim or the pod changes), as kube does; so does a
  claim that cannot be allocated anywhere as written (a DeviceClass missing, a CEL selector that
  does not compile: the allocator's ERROR). A pod asking for GPUs in both protocols is refused
  (it must change). A claim allocated already keeps the pod to the nodes its devices are on.
- Filter runs the structured allocator (`allocator.allocate`) on the node for the claims not
  allocated yet, against what is held there: the store's allocated claims (assumed ones too)
  and the GPUs Koordinator-protocol pods hold (`ledger.held`). The answer is memoised per node
  and claim shape until the node's devices or the store's view of the node change, and shared
  between nodes alike (`alike.py`: the same devices, holdings and GPU use, identities left out,
  and the same answers of the claims' selectors on each device), so a claim shape costs one
  allocator run per kind of node, not one per node. A rejection is the allocator's reason:
  which claim, which request, which selector or constraint (on which node).
- Score is DeviceShare's device score of the node with the GPUs the claims take (`ledger.node_score`);
  within a node the allocator tries devices in DeviceShare's order (`ledger.rank`: shares packed
  onto partly used GPUs, whole devices kept on one PCIe switch, partly used switches first).
- Reserve allocates for the chosen node, assumes each claim in the store as allocated and
  reserved for the pod (an allocated claim the pod reuses: reserved for it), and reserves the
  GPUs they take in the cache, so DeviceShare gives them to nobody; Unreserve undoes both.
- PreBind asks for each claim's `status` write (`allocation` and `reservedFor`, conditional on the
  resourceVersion the allocation was made from, so a claim changed meanwhile fails the binding
  rather than being allocated twice) and, for a claim it allocated, the delete-protection
  finalizer (kube-scheduler's); each with the write that takes it back.

The claims' holdings reach the cache through `holdings.ClaimHoldings`, which this plugin adds to
the cache's sources: a bound pod holds the GPUs its claims' allocations say, also after a restart.

Extended resources (kube's DRAExtendedResource, `apis.dra.extended`): a pod asking for a resource
a DeviceClass serves (`extendedResourceName`, `nvidia.com/gpu: 1`) gets, on a node that serves it
through DRA (`scheduler.framework.extended.dra_served`: no allocatable of it, and for a GPU name
no GPUs in the node's Device CR), a claim for it allocated with its other claims. Filter and Score
build that node's claim (one request per container asking), Reserve assumes it, and PreBind asks
for it to be created (owned by the pod, annotated `resource.kubernetes.io/extended-resource-claim`;
undone by deleting it), for its allocation and the pod's `status.extendedResourceClaimStatus`.
A claim made for the pod before and allocated is the pod's like any allocated claim; one left
unallocated by a failed binding whose undo failed makes the pod wait, with the reason.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Final

from apis.crds.device import DeviceType
from apis.dra import RESOURCE_CLAIMS, cel, extended, gpus
from apis.dra import quota as claims_quota
from apis.dra.allocation import ConsumerReference
from apis.dra.claim import AllocationMode, ResourceClaim
from apis.dra.ledger import Held
from apis.dra.names import DELETE_PROTECTION_FINALIZER
from apis.dra.slice import NodeSelector, ResourceSlice
from apis.errors import TesseraError
from apis.extension import names
from apis.extension.allocation import DeviceAllocation
from apis.k8s.core import ContainerExtendedResourceRequest
from apis.k8s.meta import ObjectMeta
from scheduler.cache import NodeInfo, PodInfo
from scheduler.framework import extended as shared_extended
from scheduler.framework import scoring
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    Access,
    ClusterEvent,
    EnqueueExtension,
    EventAction,
    EventResource,
    ExtensionPoint,
    FilterPlugin,
    Handle,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.shared import CLAIMS_CHARGE
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.framework.writes import ObjectWrite, PodAnnotations, Write
from scheduler.plugins.dynamicresources import alike, feed, ledger, reasons
from scheduler.plugins.dynamicresources.allocator import Failure, FailureKind, Node, Outcome, allocate
from scheduler.plugins.dynamicresources.args import DynamicResourcesArgs
from scheduler.plugins.dynamicresources.holdings import ClaimHoldings
from scheduler.plugins.dynamicresources.state import ClaimsState, ReservedClaims
from scheduler.plugins.dynamicresources.store import ClaimStore

__all__ = ["COMPILER", "NAME", "STORE", "DynamicResources", "new"]

NAME: Final = "DynamicResources"
#: The scheduler's one ClaimStore and CEL compiler (`Handle.scheduler_object`).
STORE: Final = "scheduler.dynamicresources.ClaimStore"
COMPILER: Final = "scheduler.dynamicresources.Compiler"
#: kube's ResourceClaimReservedForMaxSize.
RESERVED_FOR_MAX: Final = 256
_CLAIMS = f"{NAME}/claims"
_RESERVED = f"{NAME}/reserved"
_SHAPES_PER_NODE = 64
_MAX_SHARED = 1 << 16
#: Stands for the node's name in an answer nodes alike share.
_THE_NODE = "\0node"


@dataclasses.dataclass(slots=True)
class _Answer:
    """The allocator's answer for a claim shape on a node, as Filter and Score need it: the
    failure (its message naming the node by `_THE_NODE` when `shareable`), or the GPUs the
    claims would take (minor -> Koordinator's resources) and the node score, computed once."""

    failure: Failure | None
    usage: Mapping[int, Mapping[str, int]]
    shareable: bool
    score: int | None = None

    @classmethod
    def of(cls, outcome: Outcome, node: str, slices: Sequence[ResourceSlice]) -> _Answer:
        failure = outcome.failure
        if outcome.allocations is not None:
            return cls(None, gpus.koordinator_usage(outcome.allocations, slices, node=node), shareable=True)
        assert failure is not None
        # A claim's own error names a device; a reason naming the node otherwise than "on node
        # <name>" (an invalid pool named after it): this node's alone.
        text = failure.message.replace(f"on node {node}", f"on node {_THE_NODE}")
        if failure.kind is FailureKind.ERROR or node in text:
            return cls(failure, {}, shareable=False)
        return cls(dataclasses.replace(failure, message=text), {}, shareable=True)

    def message(self, node: str) -> str:
        assert self.failure is not None
        return self.failure.message.replace(_THE_NODE, node) if self.shareable else self.failure.message


def _placeholder(i: int) -> str:
    return f"<claim #{i}>"


class DynamicResources(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin, EnqueueExtension
):
    name = NAME
    normalizes = True
    writes = (Access.of(CLAIMS_CHARGE, ExtensionPoint.RESERVE),)

    def __init__(self, args: DynamicResourcesArgs, handle: Handle) -> None:
        self.args = args
        self._cache = handle.cache
        self.store = handle.scheduler_object(STORE, ClaimStore, ClaimStore)
        self.compiler = handle.scheduler_object(COMPILER, cel.Compiler, cel.Compiler)
        self.classes = handle.scheduler_object(
            shared_extended.KEY, shared_extended.ExtendedClasses, shared_extended.ExtendedClasses
        )
        handle.cache.holdings.add(ClaimHoldings(self.store))
        feed.watch(handle.feeds, self.store, handle.cache, key=STORE, classes=self.classes)
        #: node -> (what the answers depend on, claim shape -> the allocator's answer).
        self._memo: dict[str, tuple[Hashable, dict[str, _Answer]]] = {}
        #: (claim shape, what the shape makes of a node alike) -> the answer nodes alike share.
        self._signatures = alike.Signatures()
        #: node -> (what they depend on, its slices, what is held there, its signature).
        self._views: dict[str, tuple[Hashable, list[ResourceSlice], Held, int | None]] = {}
        self._shared: dict[Hashable, _Answer] = {}
        #: How many nodes Filter judged for claims to allocate, and how many times it ran the
        #: allocator for them (the others served by the memo or by a node alike).
        self.nodes_filtered = 0
        self.allocator_runs = 0

    # --- PreFilter ----------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        spec = pod.pod
        mapped = self.classes.mapped(pod)
        if not spec.resource_claims and not mapped:
            return None, SKIP
        if spec.resource_claims and DeviceType.GPU in pod.device_requests:
            asked = ", ".join(sorted(n for n in pod.requests if pod.requests[n] and "gpu" in n))
            return None, Status.invalid_pod(reasons.BOTH_PROTOCOLS.format(resources=asked), plugin=NAME)
        claims: list[ResourceClaim] = []
        for pod_claim in spec.resource_claims:
            name = spec.claim_name(pod_claim)
            if name is None:
                continue
            if not name:
                why = reasons.WAITING_FOR_CLAIM.format(
                    claim=pod_claim.name, template=pod_claim.resource_claim_template_name
                )
                return None, Status.unresolvable(why, plugin=NAME)
            claim = self.store.claim(f"{spec.namespace}/{name}")
            refused = _refuses(claim, pod, name, template=bool(pod_claim.resource_claim_template_name))
            if refused is not None:
                return None, refused
            assert claim is not None
            if all(c.key != claim.key for c in claims):
                claims.append(claim)
        if mapped:
            made = self.store.claim(f"{spec.namespace}/{extended.claim_name(spec)}")
            if made is not None and extended.find_claim(spec, (made,)) is not None:
                if made.allocation is None:
                    why = reasons.EXTENDED_CLAIM_LEFT.format(claim=made.key)
                    return None, Status.unresolvable(why, plugin=NAME)
                claims.append(made)
                mapped = {}
        to_allocate = tuple(c for c in claims if c.allocation is None)
        allocated = tuple(c for c in claims if c.allocation is not None)
        if to_allocate:
            # A claim's own error (its class missing, a selector that does not compile) is the
            # same on every node: said once, before any node is tried.
            check = allocate(
                to_allocate, node=Node(""), classes=self.store.classes, slices=(), held=Held(), compiler=self.compiler
            )
            if check.failure is not None and check.failure.kind is FailureKind.ERROR:
                return None, Status.unresolvable(reasons.CLAIM_ERROR.format(reason=check.failure), plugin=NAME)
        try:
            selectors = tuple(
                None
                if c.allocation is None or c.allocation.node_selector is None
                else NodeSelector.from_dict(c.allocation.node_selector, "status.allocation.nodeSelector", c.key)
                for c in allocated
            )
        except TesseraError as e:
            return None, Status.unresolvable(str(e), plugin=NAME)
        anonymous = tuple(
            dataclasses.replace(c, meta=ObjectMeta(name=_placeholder(i))) for i, c in enumerate(to_allocate)
        )
        shape = json.dumps([c.spec.to_dict() for c in to_allocate], sort_keys=True)
        found = ClaimsState(
            tuple(claims), to_allocate, allocated, shape, anonymous, selectors, tuple(sorted(mapped.items()))
        )
        state.write(_CLAIMS, found)
        return _only_nodes(allocated), SUCCESS

    # --- Filter and Score -----------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        found = state.read(_CLAIMS, ClaimsState)
        if found is None:
            return SUCCESS
        labels = node.node.labels if node.node is not None else {}
        for claim, selector in zip(found.allocated, found.selectors, strict=True):
            if selector is not None and not selector.matches(labels, node.name):
                return Status.unresolvable(reasons.ALLOCATED_ELSEWHERE.format(claim=claim.key), plugin=NAME)
        work = self._work(found, pod, node)
        if not work.claims:
            return SUCCESS
        self.nodes_filtered += 1
        unknown = node.devices.unknown_holders(DeviceType.GPU)
        if unknown and any(s.driver == gpus.DRIVER for s in self.store.slices_for(node.name)):
            return Status.unschedulable(reasons.UNKNOWN_GPUS.format(pods=", ".join(unknown)), plugin=NAME)
        answer = self._outcome(work, node)
        failure = answer.failure
        if failure is None:
            return SUCCESS
        message = _named(answer.message(node.name), work.claims)
        if failure.kind is FailureKind.ERROR:
            return Status.unresolvable(reasons.CLAIM_ERROR.format(reason=message), plugin=NAME)
        return Status.unschedulable(message, plugin=NAME)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        found = state.read(_CLAIMS, ClaimsState)
        return SUCCESS if found is not None and (found.to_allocate or found.extended) else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        found = state.read(_CLAIMS, ClaimsState)
        if found is None:
            return 0
        work = self._work(found, pod, node)
        if not work.claims:
            return 0
        answer = self._outcome(work, node)
        if answer.failure is not None:
            return 0
        if answer.score is None:  # the same on every node alike: their GPUs are used alike
            answer.score = ledger.node_score(node, answer.usage, self.args.scoring) if answer.usage else 0
        return answer.score

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        scoring.default_normalize(scores)

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """A pod without claims: a constant (nothing here depends on the node). With claims: none
        (the answers depend on the store, not only on the NodeInfo: this plugin memoises them)."""
        return 0 if state.read(_CLAIMS, ClaimsState) is None else None

    def _work(self, found: ClaimsState, pod: PodInfo, node: NodeInfo) -> _Work:
        """The claims to allocate on `node`: the pod's not allocated yet and, where the node serves
        some of its extended resources through DRA, the claim for them."""
        served = shared_extended.dra_served(dict(found.extended), node) if found.extended else {}
        if not served:
            return _Work(found.to_allocate, found.anonymous, found.shape)
        requests, mappings = extended.requests_and_mappings(pod.pod, served)
        claim = extended.claim_for(pod.pod, requests)
        anonymous = dataclasses.replace(claim, meta=ObjectMeta(name=_placeholder(len(found.to_allocate))))
        shape = found.shape + json.dumps(requests, sort_keys=True)
        return _Work((*found.to_allocate, claim), (*found.anonymous, anonymous), shape, claim, mappings)

    def _outcome(self, found: _Work, node: NodeInfo) -> _Answer:
        """The allocator's answer for the claims' shape on `node`, memoised until what it read
        changes (the node's devices and labels, the store's view of the node), and shared with
        the nodes alike (`alike.Signatures`)."""
        labels = node.node.labels if node.node is not None else {}
        depends = (node.device_generation, self.store.node_key(node.name), tuple(sorted(labels.items())))
        entry = self._memo.get(node.name)
        if entry is None or entry[0] != depends:
            entry = self._memo[node.name] = (depends, {})
        elif len(entry[1]) >= _SHAPES_PER_NODE:
            entry[1].clear()
        answer = entry[1].get(found.shape)
        if answer is None:
            answer = entry[1][found.shape] = self._answer(found, node, depends)
        return answer

    def _answer(self, found: _Work, node: NodeInfo, depends: Hashable) -> _Answer:
        view = self._views.get(node.name)
        if view is None or view[0] != depends:
            slices = self.store.slices_for(node.name)
            # The claims being allocated are not allocated: they hold nothing to leave out.
            held = self._held((), node, slices)
            view = self._views[node.name] = (depends, slices, held, self._signatures.of(node, slices, held))
        _, slices, held, signature = view
        key: Hashable | None = None
        if signature is not None:
            shape = self._signatures.shape(signature, found.anonymous, slices, self.store.classes, self.compiler)
            key = (found.shape, shape) if shape is not None else None
            shared = self._shared.get(key) if key is not None else None
            if shared is not None:
                return shared
        outcome = self._allocate(found.anonymous, node, slices=slices, held=held)
        self.allocator_runs += 1
        answer = _Answer.of(outcome, node.name, slices)
        if key is not None and answer.shareable:
            if len(self._shared) >= _MAX_SHARED:
                self._shared.clear()
            self._shared[key] = answer
        return answer

    def _held(self, claims: Sequence[ResourceClaim], node: NodeInfo, slices: Sequence[ResourceSlice]) -> Held:
        """What both protocols hold on the node, the claims being allocated left out."""
        claims_held = self.store.held_on(
            node.name, besides=[c.key for c in claims], rounding=gpus.whole_percents(slices, node=node.name)
        )
        return ledger.held(node, claims_held, slices)

    def _allocate(
        self,
        claims: Sequence[ResourceClaim],
        node: NodeInfo,
        *,
        slices: Sequence[ResourceSlice] | None = None,
        held: Held | None = None,
    ) -> Outcome:
        if slices is None:
            slices = self.store.slices_for(node.name)
        if held is None:
            held = self._held(claims, node, slices)
        count = max(
            (
                sub.count
                for c in claims
                for request in c.spec.requests
                for sub in request.alternatives
                if sub.allocation_mode is AllocationMode.EXACT_COUNT
            ),
            default=1,
        )
        shares = any(sub.capacity for c in claims for request in c.spec.requests for sub in request.alternatives)
        labels = node.node.labels if node.node is not None else {}
        return allocate(
            claims,
            node=Node(node.name, labels),
            classes=self.store.classes,
            slices=slices,
            held=held,
            compiler=self.compiler,
            rank=ledger.rank(node, count=count, shares=shares),
            max_steps=self.args.max_steps,
        )

    # --- Reserve, Unreserve, PreBind ------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        found = state.read(_CLAIMS, ClaimsState)
        if found is None:
            return SUCCESS
        info = self._cache.node(node)
        if info is None:
            return Status.unschedulable(f"node {node} is gone", plugin=NAME)
        me = ConsumerReference.pod(pod.pod.name, pod.pod.uid)
        changes: list[tuple[ResourceClaim, ResourceClaim]] = []
        work = self._work(found, pod, info)
        if work.claims:
            outcome = self._allocate(work.claims, info)
            if outcome.allocations is None:
                return Status.unschedulable(str(outcome.failure), plugin=NAME)
            for claim, allocation in zip(work.claims, outcome.allocations, strict=True):
                changes.append((claim, _reserved(dataclasses.replace(claim, allocation=allocation), me)))
        for claim in found.allocated:
            if all(c.uid != me.uid for c in claim.reserved_for):
                changes.append((claim, _reserved(claim, me)))
        for old, new in changes:
            self.store.assume(new, base=old.meta.resource_version, pod=pod.ident)
        held = ledger.gpu_holdings(
            (new.allocation for _, new in changes if new.allocation is not None and new.reserved_for[0] == me),
            self.store.slices_for(node),
            node=node,
        )
        if held:
            current = info.devices.holdings.get(pod.ident)
            others = dict(current.allocations) if current is not None else {}
            others[DeviceType.GPU] = held
            exclusive = current.pcie_exclusive if current is not None else frozenset()
            self._cache.reserve_devices(pod, node, others, pcie_exclusive=exclusive)
        # The quota charge: claims allocated for this pod (the first they are reserved for), not
        # the one for its extended resources (its request of them is charged).
        made = f"{pod.pod.namespace}/{extended.claim_name(pod.pod)}"
        charged = claims_quota.charge(
            (new for _, new in changes if new.reserved_for[0] == me and new.key != made),
            self.store.slices_for(node),
            node=node,
        )
        if charged:
            state.put(CLAIMS_CHARGE, charged)
        reserved = ReservedClaims(node, tuple(changes), bool(held), work.created, work.mappings, charged)
        state.write(_RESERVED, reserved)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        reserved = state.read(_RESERVED, ReservedClaims)
        if reserved is None or reserved.node != node:
            return
        for _, new in reserved.changes:
            self.store.forget(new.key, pod=pod.ident)
        info = self._cache.node(node)
        current = info.devices.holdings.get(pod.ident) if info is not None else None
        if reserved.gpus and current is not None and self._cache.is_assumed(pod.ident):
            others: dict[DeviceType, tuple[DeviceAllocation, ...]] = {
                t: a for t, a in current.allocations.items() if t is not DeviceType.GPU
            }
            if others:
                self._cache.reserve_devices(pod, node, others, pcie_exclusive=current.pcie_exclusive)
            else:
                self._cache.release_devices(pod.ident, node)
        state.delete(_RESERVED)

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        reserved = state.read(_RESERVED, ReservedClaims)
        if reserved is None or reserved.node != node:
            return (), SUCCESS
        writes: list[Write] = []
        created = reserved.created
        for old, new in reserved.changes:
            if created is not None and old.key == created.key:
                writes.extend(_creation(pod, old))
            writes.extend(claim_writes(old, new))
        if created is not None:
            writes.append(_pod_status(pod, created, reserved))
        charge = claims_quota.encode(reserved.charge) if reserved.charge else None
        if charge is not None or names.ANNOTATION_CLAIMS_QUOTA_CHARGE in pod.pod.annotations:
            writes.insert(0, PodAnnotations({names.ANNOTATION_CLAIMS_QUOTA_CHARGE: charge}))
        return writes, SUCCESS

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (
            feed.CLAIM_CHANGED,
            feed.SLICE_CHANGED,
            feed.CLASS_CHANGED,
            # Room freed (a pod with claims or GPUs deleted, a binding undone), a bound pod's
            # record of its GPUs changed, or the pod's own claims recorded by the controller.
            ClusterEvent(EventResource.POD, EventAction.DELETE | EventAction.UPDATE),
            ClusterEvent(EventResource.NODE, EventAction.ADD | EventAction.UPDATE),
            ClusterEvent(EventResource.DEVICE, EventAction.ALL),
        )


def _refuses(claim: ResourceClaim | None, pod: PodInfo, name: str, *, template: bool) -> Status | None:
    key = f"{pod.pod.namespace}/{name}"
    if claim is None:
        return Status.unresolvable(reasons.CLAIM_NOT_FOUND.format(claim=key), plugin=NAME)
    if claim.meta.deletion_timestamp:
        return Status.unresolvable(reasons.CLAIM_DELETING.format(claim=key), plugin=NAME)
    if template and pod.pod.uid and all(o.uid != pod.pod.uid for o in claim.meta.owner_references):
        return Status.unresolvable(reasons.CLAIM_NOT_OWNED.format(claim=key), plugin=NAME)
    consumers = {c.uid for c in claim.reserved_for}
    if claim.allocation is not None and pod.pod.uid not in consumers and len(consumers) >= RESERVED_FOR_MAX:
        return Status.unresolvable(reasons.RESERVED_FOR_FULL.format(claim=key, max=RESERVED_FOR_MAX), plugin=NAME)
    return None


def _only_nodes(allocated: Sequence[ResourceClaim]) -> PreFilterResult | None:
    """The one node an allocated claim's devices are local to (`metadata.name In [node]`, as the
    allocator writes it), when one is; None: every node is worth filtering."""
    nodes: frozenset[str] | None = None
    for claim in allocated:
        assert claim.allocation is not None
        selector = claim.allocation.node_selector
        terms = selector.get("nodeSelectorTerms") if selector is not None else None
        if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], Mapping):
            continue
        fields = terms[0].get("matchFields") or []
        for requirement in fields if not terms[0].get("matchExpressions") else []:
            if (
                isinstance(requirement, Mapping)
                and requirement.get("key") == "metadata.name"
                and requirement.get("operator") == "In"
                and isinstance(requirement.get("values"), list)
            ):
                names = frozenset(str(v) for v in requirement["values"])
                nodes = names if nodes is None else nodes & names
    return PreFilterResult(nodes) if nodes is not None else None


def _reserved(claim: ResourceClaim, me: ConsumerReference) -> ResourceClaim:
    return dataclasses.replace(claim, reserved_for=(*claim.reserved_for, me))


def _named(message: str, claims: Sequence[ResourceClaim]) -> str:
    """The allocator's message about the placeholder claims, naming the pod's own."""
    for i, claim in enumerate(claims):
        message = message.replace(_placeholder(i), claim.key)
    return message


@dataclasses.dataclass(frozen=True, slots=True)
class _Work:
    """The claims a pod's cycle allocates on one node (`DynamicResources._work`)."""

    claims: tuple[ResourceClaim, ...]
    #: `claims` named by placeholders; `shape`: equal for pods asking the same on the node.
    anonymous: tuple[ResourceClaim, ...]
    shape: str
    #: The claim for the pod's extended resources, to create (None: none on this node).
    created: ResourceClaim | None = None
    mappings: tuple[ContainerExtendedResourceRequest, ...] = ()


def _creation(pod: PodInfo, claim: ResourceClaim) -> list[ObjectWrite]:
    """The creation of the claim for the pod's extended resources, undone by deleting it."""
    requests = [r.to_dict() for r in claim.spec.requests]
    ns, name = claim.meta.namespace, claim.meta.name
    undo = ObjectWrite(RESOURCE_CLAIMS, name, {}, namespace=ns, verb="delete")
    return [
        ObjectWrite(RESOURCE_CLAIMS, name, extended.claim_manifest(pod.pod, requests), ns, undo=undo, verb="create")
    ]


def _pod_status(pod: PodInfo, claim: ResourceClaim, reserved: ReservedClaims) -> ObjectWrite:
    """The pod's `status.extendedResourceClaimStatus`, naming the claim and its request mappings."""
    p = pod.pod
    undo = ObjectWrite(
        names.CORE_PODS, p.name, {"status": {"extendedResourceClaimStatus": None}}, p.namespace, "status"
    )
    patch = extended.status_patch(claim.meta.name, reserved.mappings)
    return ObjectWrite(names.CORE_PODS, p.name, patch, p.namespace, "status", undo=undo)


def claim_writes(old: ResourceClaim, new: ResourceClaim) -> list[ObjectWrite]:
    """The writes that make `old` what the cycle assumed (`new`): its status — `allocation` when
    it was not allocated, `reservedFor` — conditional on `old`'s resourceVersion, and for a
    claim allocated now the delete-protection finalizer; each with its undo."""
    ns, name = old.meta.namespace, old.meta.name
    status: dict[str, object] = {"reservedFor": [c.to_dict() for c in new.reserved_for]}
    undo: dict[str, object] = {"reservedFor": [c.to_dict() for c in old.reserved_for] or None}
    if old.allocation is None and new.allocation is not None:
        status["allocation"] = new.allocation.to_dict()
        undo["allocation"] = None
    patch: dict[str, object] = {"status": status}
    if old.meta.resource_version:
        patch["metadata"] = {"resourceVersion": old.meta.resource_version}
    writes = [
        ObjectWrite(
            RESOURCE_CLAIMS,
            name,
            patch,
            namespace=ns,
            subresource="status",
            undo=ObjectWrite(RESOURCE_CLAIMS, name, {"status": undo}, namespace=ns, subresource="status"),
        )
    ]
    if old.allocation is None and DELETE_PROTECTION_FINALIZER not in old.meta.finalizers:
        finalizers = [*old.meta.finalizers, DELETE_PROTECTION_FINALIZER]
        writes.append(
            ObjectWrite(
                RESOURCE_CLAIMS,
                name,
                {"metadata": {"finalizers": finalizers}},
                namespace=ns,
                undo=ObjectWrite(
                    RESOURCE_CLAIMS, name, {"metadata": {"finalizers": list(old.meta.finalizers) or None}}, namespace=ns
                ),
            )
        )
    return writes


def new(args: Mapping[str, object] | None, handle: Handle) -> DynamicResources:
    """Raises ConfigError for bad arguments."""
    return DynamicResources(DynamicResourcesArgs.from_dict(args), handle)
