"""DeviceShare: gives a pod exactly the GPUs (or GPU shares), RDMA and FPGA devices it asks for.

The bookkeeping half of device scheduling (the placement half is `allocator.AllocationPolicy`):

- PreFilter takes the request as `PodInfo` parsed it once (`apis.extension.devicerequest`
  rules; an invalid request or a malformed hint rejects the pod as UnschedulableAndUnresolvable
  with a reason naming the problem) and asks `GPUFreeIndex` which nodes might fit.
- PreFilter also rejects a shared-GPU pod that must match a GPU shared-resource template
  (`gpuSharedResourceTemplatesConfig`: it asks for a matched resource) and matches none.
- Filter first applies Koordinator's node rules for a pod asking for a share of a GPU: the
  node's `koordinator.sh/gpu-isolation-provider` label must equal the pod's (when the pod has
  one), the node's GPU model must not be in `gpuShareUnsupportedModels`, and it must have a
  template the share matches (when the pod must match one).
  Then it asks the policy for an allocation on the node, memoised per request shape and node
  device generation (`FitMemo`), so Score and Reserve reuse it and so do the next pods of the
  same shape. A node where a bound pod's devices of a requested type are unknown (its
  annotation cannot be read) is rejected outright; over-committed devices count as full, and
  a rejection names them.
- Score is the policy's node score, normalized (kube's DefaultNormalizeScore).
- Reserve records the chosen devices in the cluster cache (shared by every profile); Unreserve
  releases them (idempotent). PreBind asks for the `device-allocated` annotation (the record the
  cache's default holdings source reads back once the pod is bound).
- On the node of a Reservation it may be placed onto (the shared entry `NOMINATED_RESERVATIONS`,
  written at PreFilter by the Reservation plugin), an owner fits by the Reservation's allocate
  policy (`reserved`): within the devices it has left, and for an Aligned one with the node's
  free devices when they are not enough; at Reserve, an owner that consumed the Reservation
  (`CONSUMED_RESERVATION`) and asks for exactly its devices gets those very devices. Both are
  declared in `reads`: a profile that runs this plugin before Reservation is refused at startup.
- For a Reservation placed over running pods (pre-allocation: the shared entry `PRE_ALLOCATED`),
  the reserve pod fits on the node without those pods (their devices free for it), and Reserve
  holds in the cache only what those pods do not hold already: their devices and the
  Reservation's are one holding, never counted twice (the PreBind record names all of them).
- A pod whose GPU resource (`nvidia.com/gpu`, ...) a DeviceClass serves (`extendedResourceName`)
  is left to DynamicResources on a node without GPUs in its Device CR nor allocatable of that
  name (`scheduler.framework.extended.dra_served`): there DeviceShare neither filters nor takes
  anything; everywhere else it serves the pod as always. PreFilter then narrows no nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence

from apis.crds.device import DeviceType
from apis.errors import AnnotationError
from apis.extension import allocation as allocation_codec
from apis.extension import deprecated, devicetypes, hints, names, partitions, sharedtemplates
from apis.extension.allocation import DeviceAllocation
from scheduler import fragmentation
from scheduler.cache import NodeInfo, PodInfo
from scheduler.cache.reservations import HeldReservation, remaining_devices
from scheduler.framework import extended, scoring
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.ids import Ids
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
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.shared import CONSUMED_RESERVATION, NOMINATED_RESERVATIONS, PRE_ALLOCATED
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.framework.writes import PodAnnotations, Write
from scheduler.plugins.deviceshare import reasons, reserved
from scheduler.plugins.deviceshare.allocator import POLICIES, Allocation, AllocationPolicy, PodDeviceRequest
from scheduler.plugins.deviceshare.args import DeviceShareArgs
from scheduler.plugins.deviceshare.cache import FitMemo, GPUFreeIndex, NodeFit, SharedFit, SharedFits, Signatures
from scheduler.plugins.deviceshare.state import RequestState, ReservedState
from scheduler.plugins.deviceshare.templatefeed import TEMPLATES_CHANGED, watch_templates

NAME = "DeviceShare"
_RESERVED = f"{NAME}/reserved"
_MAX_SHAPES = 4096
_DEVICE_NAMES = devicetypes.RESOURCE_NAMES


class DeviceShare(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, PreBindPlugin, EnqueueExtension):
    name = NAME
    normalizes = True
    reads = (
        Access.of(NOMINATED_RESERVATIONS, ExtensionPoint.PRE_FILTER),
        Access.of(PRE_ALLOCATED, ExtensionPoint.PRE_FILTER),
        Access.of(CONSUMED_RESERVATION, ExtensionPoint.RESERVE),
    )

    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.policy: AllocationPolicy = POLICIES[args.allocation_policy](args.scoring)
        self._cache = handle.cache
        handle.cache.templates.want(args.shared_templates.ref)
        watch_templates(handle.feeds, handle.cache, args.shared_templates.ref)
        self._memo = FitMemo()
        self._signatures = Signatures()
        self._shared = SharedFits()
        self._index = GPUFreeIndex(handle.cache)
        #: Request shape -> small id (never reused), so per-node lookups hash an int.
        self._shape_ids = Ids(_MAX_SHAPES)
        #: The target workload, for a policy that measures fragmentation (else None): shared
        #: with GPUFragmentation through the handle, so both measure against the same one.
        self._learner = fragmentation.shared_learner(handle, args.workload) if self.policy.uses_workload else None
        self._supply = fragmentation.shared_supply(handle) if self.policy.uses_workload else None
        self._classes = handle.scheduler_object(extended.KEY, extended.ExtendedClasses, extended.ExtendedClasses)

    # --- PreFilter --------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        error = pod.request_error
        if error is not None:
            return None, Status.invalid_pod(reasons.INVALID_REQUEST.format(reason=error.reason), plugin=NAME)
        requests = pod.device_requests
        demand = self._observe(pod)
        if not requests:
            return None, SKIP
        annotations = pod.pod.annotations
        try:
            pod_hints = hints.hints_from_annotations(annotations, obj=pod.key)
            joint = hints.joint_allocate_from_annotations(annotations, obj=pod.key)
            partition_spec = partitions.spec_from_annotations(annotations, obj=pod.key)
        except AnnotationError as e:
            return None, Status.invalid_pod(str(e), plugin=NAME)
        gpu = requests.get(DeviceType.GPU)
        if demand is not None and (gpu is None or not gpu.shared or gpu.count != 1):
            demand = None  # only where a share of one GPU goes depends on the workload
        request = PodDeviceRequest(
            requests, pod_hints, joint, demand[1] if demand is not None else None, partition_spec=partition_spec
        )
        # Whether a node may take a share depends on the pod's provider label, and on the models
        # with a template the share matches: both part of the shape.
        share_provider = pod.pod.labels.get(names.LABEL_GPU_ISOLATION_PROVIDER, "") if gpu and gpu.shared else None
        template_models = None
        dra = {n: c for n, c in self._classes.mapped(pod).items() if n in pod.requests and n in _DEVICE_NAMES}
        templates = self.args.shared_templates
        if gpu is not None and gpu.shared and not templates.matched_resources.isdisjoint(gpu.per_device):
            matched = sharedtemplates.matching(self._cache.templates.get(templates.ref), gpu.per_device)
            if not matched:
                return None, Status.unresolvable(reasons.NO_MATCHED_TEMPLATE, plugin=NAME)
            template_models = frozenset(matched)
        asked = (
            tuple(
                sorted((t.value, r.count, tuple(sorted(r.per_device.items())), r.shared) for t, r in requests.items())
            ),
            annotations.get(names.ANNOTATION_DEVICE_ALLOCATE_HINT),
            annotations.get(names.ANNOTATION_DEVICE_JOINT_ALLOCATE),
            partition_spec,
            share_provider,
            template_models,
            tuple(sorted(dra.items())),
        )
        epoch = demand[0] if demand is not None else 0
        shape, request_id = self._shape_ids.of((*asked, epoch)), self._shape_ids.of(asked)
        nominated = state.get(NOMINATED_RESERVATIONS) or {}
        pre_allocated = state.get(PRE_ALLOCATED) or {}
        found = RequestState(
            request, shape, request_id, epoch, share_provider, template_models, nominated, pre_allocated, dra
        )
        state.write(NAME, found)
        self._index.sync()
        candidates = self._index.candidates(request) if not dra else None
        if candidates is not None and (nominated or pre_allocated):
            # The index counts reserved devices as used; the pod's own Reservation frees them, and
            # so do the pods a Reservation is placed over.
            candidates = candidates | frozenset(nominated) | frozenset(pre_allocated)
        return (PreFilterResult(candidates) if candidates is not None else None), SUCCESS

    def _observe(self, pod: PodInfo) -> tuple[int, fragmentation.Demand] | None:
        """Count the pod in the learned workload (a policy measuring fragmentation only); the
        workload's version and GPU demand to place it with. Called for every pod that passes
        the request rules, with or without devices (GPUFragmentation counts the others: the
        learner counts each pod once)."""
        if self._learner is None or self._supply is None:
            return None
        self._learner.observe(pod.ident, fragmentation.task_shape(pod))
        index = self._learner.index(self._supply.current())
        return index.version, index.demand

    # --- Filter and Score ---------------------------------------------------------------------------
    def _fit(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> NodeFit | None:
        found = state.read(NAME, RequestState)
        if found is None or (found.dra and extended.dra_served(found.dra, node)):
            return None
        held = found.nominated.get(node.name) if found.nominated else None
        if held is not None and not held.reserved.keys().isdisjoint(found.request.requests):
            return self._fit_reserved(node, held, found)
        taken = found.pre_allocated.get(node.name) if found.pre_allocated else None
        if taken:
            return self._fit_over(node, taken, found)
        fit = self._memo.get(node, found.shape)
        if fit is None:
            fit = _blocked_by_unknown(node, found.request) or self._allocate(node, found)
            self._memo.put(node, found.shape, fit)
        return fit

    def _fit_reserved(self, node: NodeInfo, held: HeldReservation, found: RequestState) -> NodeFit:
        """The fit of an owner on the node of the Reservation it is placed onto, by the
        Reservation's allocate policy (`reserved`): within what it has left, and for an Aligned
        one, when that cannot hold the request, with the node's free devices too."""
        inside = reserved.within(node, held)
        fit = _blocked_by_unknown(inside, found.request) or self._allocate(inside, found)
        if fit.allocation is not None or held.reservation.allocate_policy == "Restricted":
            return fit
        outside = reserved.without(node, held)
        return _blocked_by_unknown(outside, found.request) or self._allocate(outside, found)

    def _fit_over(self, node: NodeInfo, pods: Sequence[PodInfo], found: RequestState) -> NodeFit:
        """The fit of a Reservation placed over running `pods` (`reserved.over`): within their
        devices first, so that theirs and its are one holding; else on the node without them."""
        inside = reserved.over(node, pods)
        fit = _blocked_by_unknown(inside, found.request) or self._allocate(inside, found)
        if fit.allocation is not None:
            return fit
        outside = node.simulate(remove=[p.ident for p in pods if p.ident in node.pods])
        return _blocked_by_unknown(outside, found.request) or self._allocate(outside, found)

    def _allocate(self, node: NodeInfo, found: RequestState) -> NodeFit:
        """The policy's answer for the request on this node, shared with nodes alike; a rejection
        on a node with over-committed devices says which (the shared answer cannot: it leaves
        identities out)."""
        signature = self._signatures.of(node)
        shared = self._shared.get(signature, found.shape)
        if shared is None:
            result = self.policy.allocate(node.devices, found.request)
            if isinstance(result, Allocation):
                shared = SharedFit(SUCCESS, self._signatures.relative(node, result))
            else:
                status = Status(result.code, (result.reason, *result.details), NAME, result.shortfalls)
                shared = SharedFit(status, None)
            self._shared.put(signature, found.shape, shared)
        if shared.relative is not None:
            return NodeFit(shared.status, self._signatures.materialize(node, shared.relative), shared)
        status = shared.status
        if node.devices.has_overcommits():
            notes = tuple(
                reasons.OVERCOMMITTED.format(overcommit=o.describe())
                for o in node.devices.overcommits()
                if o.type in found.request.requests
            )
            status = dataclasses.replace(status, reasons=status.reasons + notes)
        return NodeFit(status, None, shared)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        found = state.read(NAME, RequestState)
        if found is not None and found.dra and extended.dra_served(found.dra, node):
            return SUCCESS
        if found is not None and found.share_provider is not None:
            refused = self._refuses_share(found, node)
            if refused is not None:
                return refused
        fit = self._fit(state, pod, node)
        return fit.status if fit is not None else SUCCESS

    def _refuses_share(self, found: RequestState, node: NodeInfo) -> Status | None:
        """Why the node takes no share of a GPU for this pod, or None: Koordinator's node rules
        for shared-GPU pods. A node whose isolation provider label differs from the pod's (when
        the pod names one); a node whose GPU model (`node.koordinator.sh/gpu-vendor`, `gpu-model`,
        else the deprecated `kubernetes.io/gpu-model`) is in `gpuShareUnsupportedModels`, or has
        no shared-resource template the share matches (when it must match one). All are
        UnschedulableAndUnresolvable (Koordinator answers the first with Error, which would fail
        the pod's whole cycle for one node)."""
        labels = node.node.labels if node.node is not None else {}
        provider = found.share_provider
        if provider and labels.get(names.LABEL_GPU_ISOLATION_PROVIDER) != provider:
            have = labels.get(names.LABEL_GPU_ISOLATION_PROVIDER) or "none"
            reason = reasons.ISOLATION_PROVIDER_MISMATCH.format(
                want=provider, have=have, label=names.LABEL_GPU_ISOLATION_PROVIDER
            )
            return Status.unresolvable(reason, plugin=NAME)
        unsupported, models = self.args.share_unsupported_models, found.template_models
        if unsupported or models is not None:
            vendor, model = labels.get(names.LABEL_GPU_VENDOR, ""), deprecated.gpu_model(labels)
            if (vendor, model) in unsupported:
                return Status.unresolvable(
                    reasons.SHARE_UNSUPPORTED_MODEL.format(model=model, vendor=vendor), plugin=NAME
                )
            if models is not None and sharedtemplates.key(vendor, model) not in models:
                return Status.unresolvable(reasons.NO_MATCHED_TEMPLATE, plugin=NAME)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        fit = self._fit(state, pod, node)
        if fit is None or fit.allocation is None or fit.shared is None:
            return 0
        if fit.shared.score is None:
            found = state.read(NAME, RequestState)
            assert found is not None
            fit.shared.score = self.policy.score(node.devices, found.request, fit.allocation)
        return fit.shared.score

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        """The request without the workload's version: whether a node fits does not depend on
        which of its GPUs a share would go to."""
        found = state.read(NAME, RequestState)
        return found.request_id if found is not None else 0

    def score_epoch(self, state: CycleState, pod: PodInfo) -> Hashable:
        """The workload's version (0 without one): it moves a share to another GPU of the node,
        which changes the node's score."""
        found = state.read(NAME, RequestState)
        return found.epoch if found is not None else 0

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        scoring.default_normalize(scores)

    # --- Reserve, Unreserve, PreBind ------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        found = state.read(NAME, RequestState)
        info = self._cache.node(node)
        if found is None or info is None:
            return SUCCESS
        held = state.get(CONSUMED_RESERVATION)
        if held is not None and held.node == node and held.devices_fit(pod):
            # The pod takes the reserved devices themselves (the Reservation plugin's Reserve,
            # which runs first, stopped counting them for the Reservation).
            return self._take(state, pod, node, Allocation(held.allocations), found)
        fit = self._fit(state, pod, info)
        if fit is None or fit.allocation is None:
            return fit.status if fit is not None else SUCCESS
        return self._take(state, pod, node, fit.allocation, found)

    def _take(self, state: CycleState, pod: PodInfo, node: str, allocation: Allocation, found: RequestState) -> Status:
        devices: Mapping[DeviceType, tuple[DeviceAllocation, ...]] = allocation.devices
        taken = found.pre_allocated.get(node) if found.pre_allocated else None
        if taken:  # what the pods taken over hold already is counted once: theirs
            devices = remaining_devices(devices, [p.allocations for p in taken])
        self._cache.reserve_devices(pod, node, devices, pcie_exclusive=found.request.pcie_exclusive)
        state.write(_RESERVED, ReservedState(node, allocation))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self._cache.release_devices(pod.ident, node)
        state.delete(_RESERVED)

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        reserved = state.read(_RESERVED, ReservedState)
        if reserved is None or reserved.node != node:
            return (), SUCCESS
        encoded = allocation_codec.encode(reserved.allocation.devices)
        return (PodAnnotations({names.ANNOTATION_DEVICE_ALLOCATED: encoded}),), SUCCESS

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (
            ClusterEvent(EventResource.DEVICE, EventAction.ALL),
            # Room freed (a bound pod deleted, a binding undone, a Reservation released), or a
            # bound pod's record of its devices changed (fixed).
            ClusterEvent(EventResource.POD, EventAction.DELETE | EventAction.UPDATE),
            ClusterEvent(EventResource.NODE, EventAction.ADD),
            # A node labelled with an isolation provider or GPU model; templates edited.
            ClusterEvent(EventResource.NODE, EventAction.UPDATE),
            TEMPLATES_CHANGED,
        )


def _blocked_by_unknown(node: NodeInfo, request: PodDeviceRequest) -> NodeFit | None:
    """Rejects the node when a pod on it may hold devices of a requested type, but which is
    unknown (its allocation cannot be read): any free-looking device may be in use."""
    devices = node.devices
    if not devices.has_unknown():
        return None
    for dtype in request.order():
        pods = devices.unknown_holders(dtype)
        if pods:
            reason = reasons.UNKNOWN_ALLOCATION.format(type=dtype.value, pods=", ".join(pods))
            return NodeFit(Status.unschedulable(reason, plugin=NAME), None)
    return None


def new(args: Mapping[str, object] | None, handle: Handle) -> DeviceShare:
    """Raises ConfigError for bad arguments."""
    return DeviceShare(DeviceShareArgs.from_dict(args), handle)
