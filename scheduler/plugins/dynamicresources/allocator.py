"""The structured allocator: which devices on one node satisfy a pod's claims, with kube's semantics.

Plain data in, plain data out: the claims to allocate, the DeviceClasses, the ResourceSlices, what is
already held on the node by either protocol (`apis.dra.ledger.Held`), the node's name and labels,
and a CEL `Compiler`. The answer is an AllocationResult per claim, or a `Failure` saying which
claim, which request and why (which selector, which constraint, how many devices were in use,
tainted, short of capacity or counters) — what `tessera explain` and the pod's condition show.
It lives with the DynamicResources plugin, whose Filter runs it once per node (the types, CEL and
the ledger it reads stay in `apis.dra`: the API server and the node agent share them); pure.

Semantics are k8s.io/dynamic-resource-allocation/structured's (its "experimental" channel, every
DRA feature on), read from its source:
- pools: per (driver, pool) only the newest `generation` counts; a pool whose slices are not all
  there (`resourceSliceCount`) is incomplete and skipped (a request for All devices fails); a pool
  with a duplicate device name, a duplicate counter set or a device consuming an unknown counter
  is invalid and skipped. Devices are tried pool by pool (sorted by driver, pool), slice by slice
  (by name), in slice order — unless a `rank` puts preferred devices first.
- a request (or each `firstAvailable` sub-request, in order, the first that works winning) needs
  `count` devices (ExactCount) or every matching device (All, at least one), each selected by the
  class's and the request's CEL selectors, reachable from the node, not in use (admin access may
  use a device in use, but not twice in one claim), with every NoSchedule/NoExecute taint
  tolerated, its capacity requests satisfiable (requestPolicy default, validRange rounding up to
  min + n*step, validValues rounding up, over the device's capacity with what is held and being
  allocated), and its consumed counters available in the pool's shared counters;
- a device allowing multiple allocations is shared: each result gets a share ID and its consumed
  capacity; otherwise the device is taken whole;
- `matchAttribute` and `distinctAttribute` constraints (list attributes as sets: match means a
  common value, distinct means disjoint) over the requests they name;
- the search is exhaustive with backtracking over combinations (never permutations) and takes the
  first solution; it stops after `max_steps` device attempts (a pathological claim is then unfit
  with that reason, not a hung scheduler);
- configuration: each class's config once per class (FromClass), the claim's config for the
  requests allocated (FromClaim), `requests` cleared when a config applies to every request;
- node selector: `metadata.name In [node]` when any device is local to the node, else the
  slices' single-term node selectors combined, else none (reachable everywhere).

Deterministic: the same input gives the same output, share IDs included (derived from the claim's
uid, the result's position and the device).
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from apis.dra import cel
from apis.dra.allocation import AllocationConfig, AllocationResult, DeviceID, DeviceResult, node_selector_for
from apis.dra.claim import (
    ALLOCATION_RESULTS_MAX_SIZE,
    AllocationMode,
    DeviceClass,
    DeviceConstraint,
    DeviceSubRequest,
    ResourceClaim,
)
from apis.dra.ledger import Held
from apis.dra.slice import CapacityRequestPolicy, Device, DeviceAttribute, DeviceCapacity, ResourceSlice
from apis.k8s.quantity import Quantity

__all__ = [
    "DEFAULT_MAX_STEPS",
    "Candidate",
    "Failure",
    "FailureKind",
    "Node",
    "Outcome",
    "allocate",
    "consumed_capacity",
]

DEFAULT_MAX_STEPS = 100_000
_SHARE_NAMESPACE = uuid.UUID("6f1b8a52-7d0e-4f3a-9c55-2f1e0d7b9a41")


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


class FailureKind(enum.Enum):
    #: The claims do not fit on this node now (other nodes, or later, may do).
    UNFIT = "Unfit"
    #: The claims cannot be allocated anywhere as written (a bad CEL expression, a missing class).
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Failure:
    kind: FailureKind
    message: str
    claim: str = ""
    request: str = ""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class Outcome:
    """`allocations` (one per claim, in order) or `failure`; `steps` is the search's work."""

    allocations: tuple[AllocationResult, ...] | None
    failure: Failure | None = None
    steps: int = 0

    @property
    def ok(self) -> bool:
        return self.allocations is not None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device the node can reach, with where it came from (what a `rank` function sees)."""

    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: _Pool

    @property
    def shared(self) -> bool:
        return self.device.allow_multiple_allocations


@dataclass(slots=True)
class _Pool:
    driver: str
    name: str
    complete: bool = True
    invalid: str = ""
    counter_sets: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    #: every device of the pool's generation, reachable or not (their counters count when held)
    all_devices: list[Device] = field(default_factory=list)


class _Stop(Exception):
    """Ends the search with a failure (raised inside the recursion, caught in `allocate`)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# --- capacity (consumable capacity and request policies) -------------------------------------------


def _round_up(requested: Fraction, capacity: DeviceCapacity) -> Fraction:
    """kube's calculateConsumedCapacity for one requested amount."""
    policy = capacity.request_policy
    if policy is None:
        return requested
    if policy.valid_range_min is not None:
        low = policy.valid_range_min.amount
        if requested < low:
            return low
        if policy.valid_range_step is None:
            return requested
        step = policy.valid_range_step.amount
        n = -((low - requested) // step)  # ceil((requested - low) / step)
        return low + step * n
    for value in policy.valid_values:
        if requested <= value.amount:
            return value.amount
    return requested


def _violates(amount: Fraction, policy: CapacityRequestPolicy | None) -> bool:
    if policy is None or (policy.default is not None and amount == policy.default.amount):
        return False
    if policy.valid_range_min is not None:
        if policy.valid_range_max is not None and amount > policy.valid_range_max.amount:
            return True
        step = policy.valid_range_step
        return step is not None and (amount - policy.valid_range_min.amount) % step.amount != 0
    if policy.valid_values:
        return all(amount != v.amount for v in policy.valid_values)
    return False


def consumed_capacity(requests: Mapping[str, Quantity], device: Device) -> dict[str, Fraction] | None:
    """What a request consumes of each of the device's capacities (requested and rounded up by
    the policy; unrequested: the policy's default, else all of it), or None when the request
    names a capacity the device lacks or breaks a request policy."""
    if any(name not in device.capacity for name in requests):
        return None
    out: dict[str, Fraction] = {}
    for name, capacity in device.capacity.items():
        if name in requests:
            amount = _round_up(requests[name].amount, capacity)
        elif capacity.request_policy is not None and capacity.request_policy.default is not None:
            amount = capacity.request_policy.default.amount
        else:
            amount = capacity.value.amount
        if _violates(amount, capacity.request_policy):
            return None
        out[name] = amount
    return out


# --- pools -------------------------------------------------------------------------------------------


def _reaches(node: Node, node_name: str, all_nodes: bool, selector: Any) -> bool:
    if node_name:
        return node_name == node.name
    if all_nodes:
        return True
    return selector is not None and bool(selector.matches(node.labels, node.name))


def _gather(slices: Sequence[ResourceSlice], node: Node) -> tuple[list[_Pool], list[Candidate]]:
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool.name)
        newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        if s.pool.generation == newest[(s.driver, s.pool.name)]:
            by_pool.setdefault((s.driver, s.pool.name), []).append(s)
    pools: list[_Pool] = []
    candidates: list[Candidate] = []
    for key in sorted(by_pool):
        members = sorted(by_pool[key], key=lambda s: s.name)
        pool = _Pool(driver=key[0], name=key[1])
        pool.complete = len(members) == members[0].pool.resource_slice_count
        names: set[str] = set()
        for s in members:
            for counter_set in s.shared_counters:
                if counter_set.name in pool.counter_sets:
                    pool.invalid = f"duplicate counter set {counter_set.name}"
                pool.counter_sets[counter_set.name] = {n: q.amount for n, q in counter_set.counters.items()}
            for device in s.devices:
                if device.name in names:
                    pool.invalid = f"duplicate device name {device.name}"
                names.add(device.name)
                pool.all_devices.append(device)
        for device in pool.all_devices:
            for use in device.consumes_counters:
                known = pool.counter_sets.get(use.counter_set)
                if known is None:
                    pool.invalid = f"device {device.name}: counter set {use.counter_set} not found"
                elif any(n not in known for n in use.counters):
                    pool.invalid = f"device {device.name}: counter not found in counter set {use.counter_set}"
        pools.append(pool)
        if not pool.complete or pool.invalid:
            continue
        for s in members:
            slice_reaches = _reaches(node, s.node_name, s.all_nodes, s.node_selector)
            for device in s.devices:
                if s.per_device_node_selection:
                    if not _reaches(node, device.node_name, device.all_nodes, device.node_selector):
                        continue
                elif not slice_reaches:
                    continue
                candidates.append(Candidate(DeviceID(s.driver, s.pool.name, device.name), device, s, pool))
    return pools, candidates


# --- requests ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Alt:
    """One way to satisfy one request of one claim (the request itself, or a sub-request)."""

    claim_index: int
    request: str  # the request's name
    sub: str  # the sub-request's name, "" for `exactly`
    spec: DeviceSubRequest
    klass: DeviceClass
    programs: list[tuple[str, cel.Program]]  # (label for reasons, program), class's first
    num_devices: int = 0
    all_devices: list[Candidate] = field(default_factory=list)

    @property
    def result_name(self) -> str:
        return f"{self.request}/{self.sub}" if self.sub else self.request


def _taint_blocks(device: Device, alt: _Alt) -> str:
    for taint in device.taints:
        if taint.prevents_allocation and not any(t.tolerates(taint) for t in alt.spec.tolerations):
            return f"tainted {taint}"
    return ""


def _attribute_set(attr: DeviceAttribute | None) -> tuple[str, frozenset[Any]] | None:
    return None if attr is None else (attr.type.value, frozenset(attr.values))


@dataclass(slots=True)
class _ConstraintState:
    spec: DeviceConstraint
    # match: the intersection so far; distinct: every value taken so far (type, values) per device
    stack: list[tuple[str, frozenset[Any]]] = field(default_factory=list)

    def admits(self, alt: _Alt, candidate: Candidate) -> bool:
        if not self.spec.applies_to(alt.request, alt.sub):
            return True
        name = self.spec.match_attribute or self.spec.distinct_attribute
        value = _attribute_set(candidate.device.attribute(name, candidate.id.driver))
        if value is None:
            return False
        if self.spec.match_attribute:
            if not self.stack:
                return True
            atype, common = self.stack[-1]
            return atype == value[0] and bool(common & value[1])
        return all(atype != value[0] or not (taken & value[1]) for atype, taken in self.stack)

    def push(self, alt: _Alt, candidate: Candidate) -> bool:
        if not self.spec.applies_to(alt.request, alt.sub):
            return False
        name = self.spec.match_attribute or self.spec.distinct_attribute
        value = _attribute_set(candidate.device.attribute(name, candidate.id.driver))
        assert value is not None
        if self.spec.match_attribute and self.stack:
            value = (value[0], self.stack[-1][1] & value[1])
        self.stack.append(value)
        return True

    def describe(self) -> str:
        kind = "matchAttribute" if self.spec.match_attribute else "distinctAttribute"
        over = ", ".join(self.spec.requests) if self.spec.requests else "every request"
        return f"constraint {kind} {self.spec.match_attribute or self.spec.distinct_attribute} over {over}"


@dataclass(slots=True)
class _Picked:
    alt: _Alt
    candidate: Candidate
    consumed: dict[str, Fraction] | None  # set for a shared device


class _Search:
    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        *,
        node: Node,
        candidates: list[Candidate],
        held: Held,
        max_steps: int,
    ) -> None:
        self.claims = claims
        self.node = node
        self.candidates = candidates
        self.held = held
        self.max_steps = max_steps
        self.steps = 0
        self.alts: list[list[list[_Alt]]] = []  # claim -> request -> alternatives
        self.constraints: list[list[_ConstraintState]] = []
        self.picked: list[list[_Picked]] = [[] for _ in claims]
        self.chosen_alt: dict[tuple[int, int], int] = {}
        self.taking: dict[DeviceID, set[int]] = {}  # device taken whole -> claim indexes
        self.sharing: dict[DeviceID, dict[str, Fraction]] = {}  # capacity being consumed by shares
        self.share_users: Counter[DeviceID] = Counter()
        self.counters_used: dict[tuple[str, str, str], Fraction] = {}  # (pool, set, counter)
        self.selectable: dict[tuple[int, DeviceID], bool] = {}
        self.available: dict[tuple[str, str, str], Fraction] | None = None

    # -- per device ----------------------------------------------------------------------------

    def is_selectable(self, alt: _Alt, alt_key: int, candidate: Candidate) -> bool:
        key = (alt_key, candidate.id)
        hit = self.selectable.get(key)
        if hit is None:
            hit = self.why_not_selected(alt, candidate) == ""
            self.selectable[key] = hit
        return hit

    def why_not_selected(self, alt: _Alt, candidate: Candidate) -> str:
        """ "" when the class's and the request's selectors select the device; raises _Stop on a
        CEL error (the claim's error, as in kube: no node can allocate it)."""
        if candidate.device.binding_conditions:
            return "has binding conditions (not supported)"
        for label, program in alt.programs:
            try:
                if not program.matches(candidate.device, candidate.id.driver):
                    return f"not selected by {label}"
            except cel.CELError as e:
                claim = self.claims[alt.claim_index]
                raise _Stop(
                    Failure(
                        FailureKind.ERROR,
                        f"claim {claim.key}, request {alt.result_name}: {label} on device {candidate.id}: {e.reason}",
                        claim.key,
                        alt.result_name,
                    )
                ) from None
        return ""

    def capacity_left(self, candidate: Candidate, consumed: Mapping[str, Fraction]) -> str:
        """ "" when the device's capacity holds `consumed` besides what is held and being taken."""
        for name, amount in consumed.items():
            total = (
                amount
                + self.held.consumed(candidate.id, name)
                + self.sharing.get(candidate.id, {}).get(name, Fraction(0))
            )
            if total > candidate.device.capacity[name].value.amount:
                return f"not enough capacity {name}"
        return ""

    def capacity_check(self, alt: _Alt, candidate: Candidate) -> tuple[str, dict[str, Fraction] | None]:
        consumed = consumed_capacity(alt.spec.capacity, candidate.device)
        if consumed is None:
            missing = [n for n in alt.spec.capacity if n not in candidate.device.capacity]
            return (f"has no capacity {missing[0]}" if missing else "capacity request outside the requestPolicy"), None
        return self.capacity_left(candidate, consumed), consumed

    def counters_fit(self, candidate: Candidate) -> bool:
        if not candidate.device.consumes_counters:
            return True
        if candidate.shared and (self.held.allocated(candidate.id) or self.share_users[candidate.id]):
            return True  # a shared device's counters are consumed once, by its first share
        available = self.pool_counters()
        pool = candidate.pool
        for use in candidate.device.consumes_counters:
            for name, amount in use.counters.items():
                key = (f"{pool.driver}/{pool.name}", use.counter_set, name)
                if self.counters_used.get(key, Fraction(0)) + amount.amount > available.get(key, Fraction(0)):
                    return False
        return True

    def pool_counters(self) -> dict[tuple[str, str, str], Fraction]:
        """Each pool's counters less what held devices consume (computed once)."""
        if self.available is None:
            self.available = {}
            seen: set[int] = set()
            for candidate in self.candidates:
                pool = candidate.pool
                if id(pool) in seen:
                    continue
                seen.add(id(pool))
                pkey = f"{pool.driver}/{pool.name}"
                for set_name, counters in pool.counter_sets.items():
                    for name, total in counters.items():
                        self.available[(pkey, set_name, name)] = total
                for device in pool.all_devices:
                    if not self.held.allocated(DeviceID(pool.driver, pool.name, device.name)):
                        continue
                    for use in device.consumes_counters:
                        for name, amount in use.counters.items():
                            key = (pkey, use.counter_set, name)
                            self.available[key] = self.available.get(key, Fraction(0)) - amount.amount
        return self.available

    def take_counters(self, candidate: Candidate, sign: int) -> None:
        pool = candidate.pool
        for use in candidate.device.consumes_counters:
            for name, amount in use.counters.items():
                key = (f"{pool.driver}/{pool.name}", use.counter_set, name)
                self.counters_used[key] = self.counters_used.get(key, Fraction(0)) + sign * amount.amount

    def in_use(self, alt: _Alt, candidate: Candidate) -> bool:
        if candidate.shared:  # shared through capacity; held whole only by a result without a share
            return not alt.spec.admin_access and candidate.id in self.held.exclusive
        if alt.spec.admin_access:
            return alt.claim_index in self.taking.get(candidate.id, set())
        return candidate.id in self.held.exclusive or bool(self.taking.get(candidate.id))

    # -- one device for one request ------------------------------------------------------------

    def try_device(self, alt: _Alt, alt_key: int, candidate: Candidate) -> _Picked | None:
        """Checks availability and constraints; on success records the device as being taken."""
        if self.in_use(alt, candidate) or not self.is_selectable(alt, alt_key, candidate):
            return None
        reason, consumed = self.capacity_check(alt, candidate)
        if reason or consumed is None:
            return None
        if _taint_blocks(candidate.device, alt) or not self.counters_fit(candidate):
            return None
        states = self.constraints[alt.claim_index]
        if not all(state.admits(alt, candidate) for state in states):
            return None
        for state in states:
            state.push(alt, candidate)
        first_share = False
        if candidate.shared:
            first_share = not self.held.allocated(candidate.id) and not self.share_users[candidate.id]
            self.share_users[candidate.id] += 1
            into = self.sharing.setdefault(candidate.id, {})
            for name, amount in consumed.items():
                into[name] = into.get(name, Fraction(0)) + amount
        else:
            self.taking.setdefault(candidate.id, set()).add(alt.claim_index)
        if not candidate.shared or first_share:
            self.take_counters(candidate, +1)
        picked = _Picked(alt, candidate, consumed if candidate.shared else None)
        self.picked[alt.claim_index].append(picked)
        return picked

    def undo(self, picked: _Picked) -> None:
        alt, candidate = picked.alt, picked.candidate
        self.picked[alt.claim_index].pop()
        for state in self.constraints[alt.claim_index]:
            if state.spec.applies_to(alt.request, alt.sub):
                state.stack.pop()
        if candidate.shared:
            self.share_users[candidate.id] -= 1
            into = self.sharing[candidate.id]
            for name, amount in (picked.consumed or {}).items():
                into[name] -= amount
            if not self.share_users[candidate.id]:
                del self.sharing[candidate.id]
                if not self.held.allocated(candidate.id):
                    self.take_counters(candidate, -1)
        else:
            self.taking[candidate.id].discard(alt.claim_index)
            self.take_counters(candidate, -1)

    # -- the recursion (kube's allocateOne) ----------------------------------------------------

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise _Stop(
                Failure(
                    FailureKind.UNFIT,
                    f"gave up after trying {self.max_steps} device combinations on node {self.node.name}",
                )
            )

    def run(self, claim: int, request: int, device: int, start: int, alt_index: int | None) -> bool:
        self.step()
        if claim >= len(self.claims):
            return True
        if request >= len(self.alts[claim]):
            return self.run(claim + 1, 0, 0, 0, None)
        alternatives = self.alts[claim][request]
        if alt_index is None:
            for index in range(len(alternatives)):
                if self.run(claim, request, 0, 0, index):
                    self.chosen_alt[(claim, request)] = index
                    return True
            return False
        alt = alternatives[alt_index]
        alt_key = id(alt)
        if alt.spec.allocation_mode is AllocationMode.ALL and not alt.all_devices:
            return False
        if device >= alt.num_devices:
            return self.run(claim, request + 1, 0, 0, None)
        if len(self.picked[claim]) + alt.num_devices - device > ALLOCATION_RESULTS_MAX_SIZE:
            return False
        if alt.spec.allocation_mode is AllocationMode.ALL:
            picked = self.try_device(alt, alt_key, alt.all_devices[device])
            if picked is None:
                return False
            if self.run(claim, request, device + 1, 0, alt_index):
                return True
            self.undo(picked)
            return False
        for position in range(start, len(self.candidates)):
            picked = self.try_device(alt, alt_key, self.candidates[position])
            if picked is None:
                continue
            if self.run(claim, request, device + 1, position + 1, alt_index):
                return True
            self.undo(picked)
            self.step()
        return False

    # -- why not -------------------------------------------------------------------------------

    def diagnose_alt(self, alt: _Alt) -> tuple[int, str]:
        """How many devices the alternative could use on its own, and why the others not."""
        reasons: Counter[str] = Counter()
        usable = 0
        for candidate in self.candidates:
            reason = self.why_not_selected(alt, candidate)
            if not reason and not alt.spec.admin_access and candidate.id in self.held.exclusive:
                reason = "in use"
            if not reason:
                reason = self.capacity_check(alt, candidate)[0]
            if not reason:
                reason = _taint_blocks(candidate.device, alt)
            if not reason and not self.counters_fit(candidate):
                reason = "not enough shared counters"
            if reason:
                reasons[reason] += 1
            else:
                usable += 1
        need = alt.num_devices if alt.spec.allocation_mode is AllocationMode.EXACT_COUNT else max(1, alt.num_devices)
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        total = len(self.candidates)
        text = f"needs {need} device(s) of class {alt.klass.name}; {usable} of {total} on node {self.node.name} fit"
        return usable, f"{text} ({detail})" if detail else text

    def diagnose(self) -> Failure:
        for claim_index, requests in enumerate(self.alts):
            claim = self.claims[claim_index]
            for alternatives in requests:
                texts = []
                for alt in alternatives:
                    usable, text = self.diagnose_alt(alt)
                    need = alt.num_devices if alt.spec.allocation_mode is AllocationMode.EXACT_COUNT else 1
                    if usable >= need:
                        break
                    texts.append(f"{alt.result_name}: {text}" if alt.sub else text)
                else:
                    request = alternatives[0].request
                    return Failure(
                        FailureKind.UNFIT,
                        f"claim {claim.key}, request {request}: {'; '.join(texts)}",
                        claim.key,
                        request,
                    )
        for claim_index, states in enumerate(self.constraints):
            if states:
                claim = self.claims[claim_index]
                what = "; ".join(s.describe() for s in states)
                return Failure(
                    FailureKind.UNFIT,
                    f"claim {claim.key}: each request has devices on node {self.node.name}, "
                    f"but not together under {what}",
                    claim.key,
                )
        if len(self.alts) == 1 and len(self.alts[0]) == 1:
            claim, alt = self.claims[0], self.alts[0][0][-1]
            return Failure(
                FailureKind.UNFIT,
                f"claim {claim.key}, request {alt.request}: devices of class {alt.klass.name} on node {self.node.name} "
                f"fit one at a time but not {alt.num_devices} together (their shared counters or capacity run out)",
                claim.key,
                alt.request,
            )
        return Failure(
            FailureKind.UNFIT,
            f"each request has devices on node {self.node.name}, but not enough for all requests together",
        )


def _build_alt(
    claim_index: int,
    claim: ResourceClaim,
    request: str,
    sub: str,
    spec: DeviceSubRequest,
    *,
    classes: Mapping[str, DeviceClass],
    compiler: cel.Compiler,
) -> _Alt:
    name = f"{request}/{sub}" if sub else request
    klass = classes.get(spec.device_class_name)
    if klass is None:
        raise _Stop(
            Failure(
                FailureKind.ERROR,
                f"claim {claim.key}, request {name}: device class {spec.device_class_name} not found",
                claim.key,
                name,
            )
        )
    programs = []
    for owner, selectors in (
        (f"selector #{{}} of class {klass.name}", klass.selectors),
        ("selector #{} of the request", spec.selectors),
    ):
        for i, selector in enumerate(selectors):
            label = owner.format(i)
            try:
                programs.append((label, compiler.compile(selector.expression)))
            except cel.CELError as e:
                raise _Stop(
                    Failure(
                        FailureKind.ERROR, f"claim {claim.key}, request {name}: {label}: {e.reason}", claim.key, name
                    )
                ) from None
    return _Alt(claim_index, request, sub, spec, klass, programs, spec.count)


def _configs(claim: ResourceClaim, chosen: list[_Alt]) -> tuple[AllocationConfig, ...]:
    out: list[AllocationConfig] = []
    by_class: dict[str, list[int]] = {}
    for alt in chosen:
        positions = by_class.get(alt.klass.name)
        if positions is not None:
            for i in positions:
                out[i] = AllocationConfig(
                    out[i].source, (*out[i].requests, alt.result_name), out[i].driver, out[i].parameters
                )
            continue
        by_class[alt.klass.name] = []
        for class_config in alt.klass.config:
            by_class[alt.klass.name].append(len(out))
            out.append(AllocationConfig("FromClass", (alt.result_name,), class_config.driver, class_config.parameters))
    for config in claim.spec.config:
        if not config.requests or any(a.request in config.requests or a.result_name in config.requests for a in chosen):
            out.append(AllocationConfig("FromClaim", config.requests, config.config.driver, config.config.parameters))
    everything = {a.request for a in chosen}
    cleared = []
    for c in out:
        covered = {a.request for a in chosen if a.request in c.requests or a.result_name in c.requests}
        cleared.append(
            AllocationConfig(c.source, (), c.driver, c.parameters) if c.requests and covered == everything else c
        )
    return tuple(cleared)


def _node_selector(picked: list[_Picked], node: Node) -> dict[str, Any] | None:
    fields: list[Any] = []
    expressions: list[Any] = []
    for p in picked:
        s, device = p.candidate.slice, p.candidate.device
        node_name, selector = (
            (device.node_name, device.node_selector) if s.per_device_node_selection else (s.node_name, s.node_selector)
        )
        if node_name or device.binds_to_node:
            return node_selector_for(node.name)
        terms = [] if selector is None else list(selector.raw.get("nodeSelectorTerms") or [])
        if len(terms) == 1 and isinstance(terms[0], Mapping):
            for into, key in ((fields, "matchFields"), (expressions, "matchExpressions")):
                for requirement in terms[0].get(key) or []:
                    if requirement not in into:
                        into.append(requirement)
    if not fields and not expressions:
        return None
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = expressions
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def allocate(
    claims: Sequence[ResourceClaim],
    *,
    node: Node,
    classes: Mapping[str, DeviceClass],
    slices: Sequence[ResourceSlice],
    held: Held,
    compiler: cel.Compiler,
    rank: Callable[[Candidate], Any] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Outcome:
    """Devices on `node` for every claim in `claims` (all or none), or why not.

    `slices` may include other nodes' slices (they are filtered, and a pool spread over several
    slices is judged complete or not from all of them). `held` is what both protocols already
    hold on the node (claims being allocated must not be in it). `rank` orders the node's devices
    before the search (a stable sort: equal ranks keep kube's order); the first solution in that
    order is returned. Never raises for bad input: a bad expression or a missing class is a
    Failure of kind ERROR.
    """
    pools, candidates = _gather(slices, node)
    if rank is not None:
        candidates.sort(key=rank)

    def prepared(subset: Sequence[ResourceClaim], on: Held) -> _Search:
        return _prepare(
            subset,
            node=node,
            classes=classes,
            candidates=candidates,
            pools=pools,
            held=on,
            compiler=compiler,
            max_steps=max_steps,
        )

    steps = 0
    try:
        search = prepared(claims, held)
        found = search.run(0, 0, 0, 0, None)
        steps = search.steps
        if found:
            return Outcome(tuple(_result(search, i, claim, node) for i, claim in enumerate(claims)), None, steps)
        failure = search.diagnose()
        if not failure.claim and len(claims) > 1:
            failure = _first_misfit(claims, held, prepared) or failure
    except _Stop as stop:
        return Outcome(None, stop.failure, steps)
    invalid = [f"{p.driver}/{p.name}: {p.invalid}" for p in pools if p.invalid]
    if invalid:
        message = f"{failure.message}; invalid resource pools: {'; '.join(invalid)}"
        failure = Failure(failure.kind, message, failure.claim, failure.request)
    return Outcome(None, failure, steps)


def _prepare(
    claims: Sequence[ResourceClaim],
    *,
    node: Node,
    classes: Mapping[str, DeviceClass],
    candidates: list[Candidate],
    pools: list[_Pool],
    held: Held,
    compiler: cel.Compiler,
    max_steps: int,
) -> _Search:
    """A search over the claims' requests (raises _Stop for a claim's own error)."""
    search = _Search(claims, node=node, candidates=candidates, held=held, max_steps=max_steps)
    for claim_index, claim in enumerate(claims):
        requests = []
        for request in claim.spec.requests:
            alternatives = []
            for spec in request.alternatives:
                sub = "" if request.exactly is not None else spec.name
                alt = _build_alt(claim_index, claim, request.name, sub, spec, classes=classes, compiler=compiler)
                if spec.allocation_mode is AllocationMode.ALL:
                    _gather_all(search, alt, pools)
                alternatives.append(alt)
            requests.append(alternatives)
        search.alts.append(requests)
        search.constraints.append([_ConstraintState(c) for c in claim.spec.constraints])
    return search


def _first_misfit(
    claims: Sequence[ResourceClaim], held: Held, prepared: Callable[[Sequence[ResourceClaim], Held], _Search]
) -> Failure | None:
    """When each claim fits alone but not all together: the first claim that does not fit beside
    the ones before it, diagnosed against what those take."""
    for k in range(2, len(claims) + 1):
        if prepared(claims[:k], held).run(0, 0, 0, 0, None):
            continue
        before = prepared(claims[: k - 1], held)
        if not before.run(0, 0, 0, 0, None):
            return None
        taken = Held.of(
            (p.candidate.id for ps in before.picked for p in ps if p.consumed is None and not p.alt.spec.admin_access),
            ((p.candidate.id, p.consumed) for ps in before.picked for p in ps if p.consumed is not None),
        )
        alone = prepared(claims[k - 1 : k], held + taken)
        if alone.run(0, 0, 0, 0, None):
            return None
        failure = alone.diagnose()
        others = ", ".join(c.key for c in claims[: k - 1])
        return Failure(
            failure.kind, f"{failure.message}, beside the pod's claims {others}", failure.claim, failure.request
        )
    return None


def _gather_all(search: _Search, alt: _Alt, pools: list[_Pool]) -> None:
    """allocationMode All: every matching device of the node, decided before the search."""
    claim = search.claims[alt.claim_index]
    for pool in pools:
        if not pool.complete or pool.invalid:
            state = "is being updated (incomplete)" if not pool.complete else f"is invalid ({pool.invalid})"
            raise _Stop(
                Failure(
                    FailureKind.UNFIT,
                    f"claim {claim.key}, request {alt.result_name}: asks for all devices, "
                    f"but resource pool {pool.driver}/{pool.name} {state}",
                    claim.key,
                    alt.result_name,
                )
            )
    for candidate in search.candidates:
        if search.why_not_selected(alt, candidate):
            continue
        consumed = consumed_capacity(alt.spec.capacity, candidate.device)
        if consumed is None or search.capacity_left(candidate, consumed):
            continue
        alt.all_devices.append(candidate)
    alt.num_devices = len(alt.all_devices)


def _result(search: _Search, claim_index: int, claim: ResourceClaim, node: Node) -> AllocationResult:
    picked = search.picked[claim_index]
    results = []
    for position, p in enumerate(picked):
        share = ""
        if p.consumed is not None:
            share = str(uuid.uuid5(_SHARE_NAMESPACE, f"{claim.meta.uid or claim.key}/{position}/{p.candidate.id}"))
        results.append(
            DeviceResult(
                request=p.alt.result_name,
                driver=p.candidate.id.driver,
                pool=p.candidate.id.pool,
                device=p.candidate.id.device,
                admin_access=True if p.alt.spec.admin_access else None,
                tolerations=tuple(t.to_dict() for t in p.alt.spec.tolerations),
                share_id=share,
                consumed_capacity={k: Quantity(v) for k, v in (p.consumed or {}).items()},
            )
        )
    chosen = [
        search.alts[claim_index][r][search.chosen_alt.get((claim_index, r), 0)]
        for r in range(len(search.alts[claim_index]))
    ]
    return AllocationResult(tuple(results), _configs(claim, chosen), _node_selector(picked, node))
