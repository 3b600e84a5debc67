"""The DRA driver's node side: prepare and unprepare ResourceClaims for kubelet.

`DRADriver` is what the gRPC service (`agent.dra.server`) calls, one claim at a time under one
lock. Prepare, for a claim kubelet names by namespace, name and UID:

1. a claim in the checkpoint is answered from it (idempotent: nothing is checked or held twice);
2. the claim is read from the API server (it must exist with that UID and be allocated); the
   results of this driver (`gpu.tessera.dev`) are its devices, found in this node's
   ResourceSlices (the `minor` attribute says which GPU, `memory` its size; `apis.dra.gpus`);
3. the node's device ledger admits it or refuses it — a share that, with what Koordinator pods
   and other claims hold, would overcommit a GPU, an unhealthy GPU, a minor the node lacks —
   with the ledger's sentence naming the holders;
4. it is recorded in the checkpoint, its CDI spec written, and the answer is one CDI device per
   allocated device.

Unprepare removes the CDI spec, then the checkpoint entry, then the ledger's hold; a claim not
prepared is already unprepared. `start()` restores the checkpoint into the ledger and makes the
CDI directory agree with it (see `agent.dra.prepared` for why that order survives kill -9).
Errors about one claim are `PrepareError` (kubelet shows them on the pod and retries).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from agent.dra.cdi import ISOLATION_HAMI_CORE, CDIDir, device_id, spec_for
from agent.dra.prepared import Checkpoint, PreparedClaim, PreparedDevice
from agent.hooks import hamicore
from agent.hooks.hamicore import HAMiCore
from agent.hooks.plugin import HookError
from agent.ledger import DeviceLedger, NodeSlots, claim_key
from apis import cdi
from apis.dra.allocation import DeviceID
from apis.dra.claim import ResourceClaim
from apis.dra.gpus import CORES, DRIVER, MEMORY, minor_of
from apis.dra.slice import Device, ResourceSlice
from apis.errors import TesseraError

__all__ = ["DRADriver", "PrepareError", "PreparedAnswer"]

log = logging.getLogger(__name__)

_WHOLE = 100
#: What this driver's opaque configuration may hold.
_CONFIG_KEYS = frozenset({"apiVersion", "kind", "isolation"})


class PrepareError(TesseraError):
    """One claim cannot be prepared or unprepared now; the message says why (kubelet retries)."""


@dataclass(frozen=True, slots=True)
class PreparedAnswer:
    """One device of kubelet's answer: kubelet's `Device` message."""

    request: str
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    share_id: str = ""


class DRADriver:
    """Prepares claims against the node's ledger; see the module docstring. Thread-safe."""

    def __init__(
        self,
        *,
        node_name: str,
        ledger: DeviceLedger,
        node: Callable[[], NodeSlots],
        get_claim: Callable[[str, str], Mapping[str, Any]],
        list_slices: Callable[[], Iterable[ResourceSlice]],
        checkpoint: Checkpoint,
        cdi_dir: CDIDir,
        dev_root: Path = Path("/dev"),
        hami_core: HAMiCore | None = None,
    ) -> None:
        """`get_claim(namespace, name)` reads a claim (raises `kube.errors.APIError`),
        `list_slices()` the ResourceSlices (all, or at least this node's)."""
        self.node_name = node_name
        self._ledger = ledger
        self._node = node
        self._get_claim = get_claim
        self._list_slices = list_slices
        self._checkpoint = checkpoint
        self._cdi = cdi_dir
        self._dev_root = dev_root
        self._hami_core = hami_core if hami_core is not None else HAMiCore()
        self._lock = threading.Lock()
        self._prepared: dict[str, PreparedClaim] = {}

    def start(self) -> None:
        """Hold what the checkpoint says is prepared, rewrite those claims' CDI specs and remove
        the agent's specs of other claims. Raises CheckpointError for an unreadable
        checkpoint, OSError when the CDI directory cannot be written."""
        with self._lock:
            self._prepared = self._checkpoint.load()
            for claim in self._prepared.values():
                self._ledger.restore(claim.ledger_claim())
                self._cdi.write(claim.uid, self._spec(claim))
            for uid in self._cdi.claims() - set(self._prepared):
                self._cdi.remove(uid)
        if self._prepared:
            log.info("Restored prepared ResourceClaims", extra={"claims": ",".join(sorted(self._prepared))})

    def prepared(self) -> dict[str, PreparedClaim]:
        """Claim UID -> what is prepared now (a copy)."""
        with self._lock:
            return dict(self._prepared)

    # --- kubelet's calls ---------------------------------------------------------------------------
    def prepare(self, namespace: str, name: str, uid: str) -> tuple[PreparedAnswer, ...]:
        """Prepare one claim (see the module). Raises PrepareError."""
        ref = f"{namespace}/{name}"
        with self._lock:
            claim = self._prepared.get(uid)
            if claim is None:
                claim = self._admit(self._read(namespace, name, uid), ref)
                self._prepared[uid] = claim
                try:
                    self._checkpoint.save(self._prepared)
                except OSError as e:
                    del self._prepared[uid]
                    self._ledger.unprepare(claim_key(uid))
                    raise PrepareError(f"claim {ref}: cannot record it in the agent's checkpoint: {e}") from e
                log.info("Prepared ResourceClaim", extra={"claim": ref, "uid": uid, "devices": len(claim.devices)})
            try:
                self._cdi.write(uid, self._spec(claim))
            except OSError as e:  # held and recorded: unprepare (or a retry) cleans up
                raise PrepareError(f"claim {ref}: cannot write its CDI spec {self._cdi.path(uid)}: {e}") from e
        return tuple(
            PreparedAnswer(d.request, d.pool, d.device, (device_id(uid, d.device),), d.share_id) for d in claim.devices
        )

    def unprepare(self, namespace: str, name: str, uid: str) -> None:
        """Release one claim; a claim not prepared here is fine. Raises PrepareError."""
        with self._lock:
            claim = self._prepared.get(uid)
            if claim is None:
                return
            try:
                self._cdi.remove(uid)
                remaining = {k: v for k, v in self._prepared.items() if k != uid}
                self._checkpoint.save(remaining)
            except OSError as e:
                raise PrepareError(f"claim {namespace}/{name}: cannot unprepare: {e}") from e
            self._prepared = remaining
            self._ledger.unprepare(claim_key(uid))
        log.info("Unprepared ResourceClaim", extra={"claim": f"{namespace}/{name}", "uid": uid})

    # --- steps ---------------------------------------------------------------------------------------
    def _read(self, namespace: str, name: str, uid: str) -> ResourceClaim:
        from kube import errors  # the client library loads with the agent anyway

        ref = f"{namespace}/{name}"
        try:
            raw = self._get_claim(namespace, name)
        except errors.NotFound as e:
            raise PrepareError(f"claim {ref} does not exist") from e
        except errors.APIError as e:
            raise PrepareError(f"claim {ref}: cannot read it from the API server: {e}") from e
        try:
            claim = ResourceClaim.from_dict(raw)
        except TesseraError as e:
            raise PrepareError(f"claim {ref} does not parse: {e}") from e
        if claim.meta.uid != uid:
            raise PrepareError(
                f"claim {ref} has UID {claim.meta.uid}, kubelet asked for {uid}: it was deleted and made again"
            )
        if claim.allocation is None:
            raise PrepareError(f"claim {ref} is not allocated")
        return claim

    def _admit(self, claim: ResourceClaim, ref: str) -> PreparedClaim:
        assert claim.allocation is not None
        ours = [r for r in claim.allocation.results if r.driver == DRIVER]
        devices = _node_devices(self._list_slices(), self.node_name)
        prepared = []
        for r in ours:
            found = devices.get(r.id)
            minor = None if found is None else minor_of(found)
            if found is None or minor is None:
                raise PrepareError(
                    f"claim {ref}: device {r.id} is not a GPU of node {self.node_name} "
                    f"(not in its {DRIVER} ResourceSlices with a minor)"
                )
            total = _ceil(found.capacity[MEMORY].value.amount) if MEMORY in found.capacity else 0
            cores, memory = _WHOLE, total
            if r.share_id:
                used = r.consumed_capacity
                cores = _ceil(used[CORES].amount) if CORES in used else 0
                memory = _ceil(used[MEMORY].amount) if MEMORY in used else 0
            prepared.append(
                PreparedDevice(
                    request=r.request,
                    pool=r.pool,
                    device=r.device,
                    minor=minor,
                    share_id=r.share_id,
                    admin_access=bool(r.admin_access),
                    cores=cores,
                    memory=memory,
                    total_memory=total,
                )
            )
        result = PreparedClaim(
            claim.meta.uid, claim.meta.namespace, claim.meta.name, tuple(prepared), _isolation(claim, ref)
        )
        try:
            self._spec(result)  # bad limits or isolation fail here, before anything is held
            if result.isolation == ISOLATION_HAMI_CORE and hamicore.is_shared(result.gpus()):
                setup = hamicore.isolation(self._hami_core, result.gpus(), pod=ref, pod_uid="", container="")
                if setup is not None:
                    hamicore.prepare_host(self._hami_core, setup, pod=f"claim {ref}")
        except HookError as e:
            raise PrepareError(str(e)) from e
        if not self._ledger.ready:
            raise PrepareError(
                f"claim {ref}: the agent has not yet read which pods run on node {self.node_name}; retry"
            )
        found_collisions = self._ledger.prepare(result.ledger_claim(), node=self._node())
        if found_collisions:
            raise PrepareError("; ".join(c.message for c in found_collisions))
        return result

    def _spec(self, claim: PreparedClaim) -> cdi.Spec:
        return spec_for(claim, dev_root=self._dev_root, hami_core=self._hami_core, isolation=claim.isolation)


def _node_devices(slices: Iterable[ResourceSlice], node: str) -> dict[DeviceID, Device]:
    return {
        DeviceID(s.driver, s.pool.name, d.name): d
        for s in slices
        if s.driver == DRIVER
        for d in s.devices
        if (d.node_name or s.node_name) == node
    }


def _isolation(claim: ResourceClaim, ref: str) -> str:
    """The `isolation` of this driver's opaque configuration (class or claim; the last wins)."""
    assert claim.allocation is not None
    isolation = ""
    for config in claim.allocation.config:
        if config.driver != DRIVER:
            continue
        params = config.parameters
        if not isinstance(params, Mapping) or set(params) - _CONFIG_KEYS:
            raise PrepareError(
                f"claim {ref}: {DRIVER}'s configuration must be an object with `isolation` (and optionally "
                f"`apiVersion`, `kind`), got {params!r}"
            )
        value = params.get("isolation", "")
        if value not in ("", ISOLATION_HAMI_CORE):
            raise PrepareError(f"claim {ref}: isolation {value!r} is unknown (known: {ISOLATION_HAMI_CORE})")
        isolation = str(value)
    return isolation


def _ceil(amount: Fraction) -> int:
    return -(-amount.numerator // amount.denominator)
