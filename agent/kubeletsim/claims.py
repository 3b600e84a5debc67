"""kubelet's DRA manager for the simulated kubelet: prepare a pod's ResourceClaims before it runs,
unprepare them after it ends, and remember which it prepared in a checkpoint.

As kubelet does (`pkg/kubelet/cm/dra`), for each of a pod's claims that one of its containers
uses: the claim is read from the API server and must be the pod's (a template's claim owned by the
pod), reserved for it and allocated; the claim is recorded with the pod's UID, and each driver of
its allocation results (`status.allocation.devices.results[].driver`) is asked in one
NodePrepareResources call per driver, on the plugin registered in the plugins_registry directory
(`draclient.PluginWatcher`). A claim two pods share is prepared once and unprepared when the last
of them ends. A failure is an error whose message is kubelet's (the caller reports it as the
`FailedPrepareDynamicResources` Event on the pod and tries again later); the pod does not run.

The checkpoint (`kubelet-dra-claims.json` in the agent's `--state-dir`; kubelet's is
`dra_manager_state`) is written before each call and after it, durably, so a kill -9 at any
point neither loses a claim nor prepares it twice:

- recorded before NodePrepareResources: a claim the plugin prepared is known after a restart even
  if its answer was never recorded, so its pod's end unprepares it; the pod, still Pending, is
  prepared again — an idempotent call the plugin answers from its own checkpoint;
- marked prepared after the answer: a running pod is not prepared again after a restart (kubelet
  calls again on its next sync of the pod; the simulated kubelet syncs only pods that change);
- removed only after NodeUnprepareResources succeeded: a claim whose pod went away while the
  agent was down is unprepared at the next `reconcile`.

    {"version": 1, "claims": {"<uid>": {"namespace": "ns", "name": "c", "pods": ["<pod uid>"],
     "drivers": {"gpu.tessera.dev": [{"pool": "p", "device": "d", "requests": ["gpu"],
     "cdiDeviceIDs": ["..."]}]}, "prepared": true}}}
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from apis.dra.claim import ResourceClaim
from apis.errors import TesseraError
from apis.k8s.core import Pod
from kube import errors
from kube.lifecycle import read_versioned, write_versioned

if TYPE_CHECKING:
    import grpc

    from agent.kubeletsim.draclient import ClaimRef, DRAPluginClient, PluginWatcher

__all__ = ["FILE_NAME", "ClaimState", "ClaimStates", "DRAManager", "PrepareFailed"]

log = logging.getLogger(__name__)

FILE_NAME: Final = "kubelet-dra-claims.json"
_VERSION: Final = 1
R = TypeVar("R")


class PrepareFailed(TesseraError):
    """A pod's claims cannot be prepared (or unprepared) now; the message is kubelet's."""


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One device of a NodePrepareResources answer (kubelet keeps them for the container's CDI devices)."""

    pool: str
    device: str
    requests: tuple[str, ...]
    cdi_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "device": self.device,
            "requests": list(self.requests),
            "cdiDeviceIDs": list(self.cdi_ids),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PreparedDevice:
        return cls(str(d["pool"]), str(d["device"]), tuple(map(str, d["requests"])), tuple(map(str, d["cdiDeviceIDs"])))


@dataclass(frozen=True, slots=True)
class ClaimState:
    """One claim as the manager knows it (kubelet's ClaimInfo)."""

    uid: str
    namespace: str
    name: str
    #: The pods that use it, by UID: it is unprepared when the last one ends.
    pods: frozenset[str]
    #: Driver -> its devices once it answered NodePrepareResources (None before).
    drivers: Mapping[str, tuple[PreparedDevice, ...] | None] = field(default_factory=dict)
    prepared: bool = False

    def ref(self) -> ClaimRef:
        from agent.kubeletsim.draclient import ClaimRef

        return ClaimRef(self.namespace, self.name, self.uid)

    def cdi_ids(self) -> tuple[str, ...]:
        return tuple(i for devices in self.drivers.values() for d in devices or () for i in d.cdi_ids)

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "pods": sorted(self.pods),
            "drivers": {
                driver: None if devices is None else [d.to_dict() for d in devices]
                for driver, devices in sorted(self.drivers.items())
            },
            "prepared": self.prepared,
        }

    @classmethod
    def from_dict(cls, uid: str, d: Mapping[str, Any]) -> ClaimState:
        return cls(
            uid=uid,
            namespace=str(d["namespace"]),
            name=str(d["name"]),
            pods=frozenset(map(str, d["pods"])),
            drivers={
                str(k): None if v is None else tuple(PreparedDevice.from_dict(x) for x in v)
                for k, v in d["drivers"].items()
            },
            prepared=bool(d["prepared"]),
        )


class ClaimStates:
    """The checkpoint file in one state directory (one writer: the manager, under its lock)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def load(self) -> dict[str, ClaimState]:
        """Claim UID -> state; empty without a file. Raises PrepareFailed for a file that is not
        what `save` writes (the agent then refuses to start: forgetting a prepared claim would
        never unprepare it)."""
        try:
            found = read_versioned(
                self.path,
                _VERSION,
                lambda doc: {str(u): ClaimState.from_dict(str(u), c) for u, c in doc["claims"].items()},
            )
        except ValueError as e:
            raise PrepareFailed(f"simulated kubelet's DRA checkpoint {self.path}: {e}") from e
        return found or {}

    def save(self, claims: Mapping[str, ClaimState]) -> None:
        """Replace the file atomically and durably. Raises OSError."""
        write_versioned(self.path, _VERSION, {"claims": {uid: c.to_dict() for uid, c in sorted(claims.items())}})


def _used_claims(pod: Pod) -> set[str]:
    """The pod's claim names some container (or init container) uses: kubelet prepares only those."""
    return {name for c in (*pod.init_containers, *pod.containers) for name in c.claims}


def _is_for_pod(claim: ResourceClaim, pod: Pod) -> bool:
    return any(o.uid == pod.uid and o.controller for o in claim.meta.owner_references)


class DRAManager:
    """Prepares and unprepares pods' claims through the registered DRA plugins; see the module.
    Thread-safe (one call at a time)."""

    def __init__(
        self,
        *,
        get_claim: Callable[[str, str], Mapping[str, Any]],
        registry_dir: Path,
        states: ClaimStates,
        plugins: PluginWatcher | None = None,
    ) -> None:
        """`get_claim(namespace, name)` reads a ResourceClaim (raises `kube.errors.APIError`);
        the plugins are those registering in `registry_dir` (gRPC loads only once a claim needs
        a plugin: a node whose pods use none never loads it), or `plugins` when given."""
        self._get_claim = get_claim
        self.registry_dir = registry_dir
        self._plugins = plugins
        self._states = states
        self._claims: dict[str, ClaimState] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        """Load the checkpoint. Raises PrepareFailed when it cannot be read."""
        with self._lock:
            self._claims = self._states.load()
        if self._claims:
            log.info("Restored the simulated kubelet's DRA claims", extra={"claims": ",".join(sorted(self._claims))})

    def claims(self) -> dict[str, ClaimState]:
        """Claim UID -> what is known of it now (a copy)."""
        with self._lock:
            return dict(self._claims)

    def holds(self, pod_uid: str) -> bool:
        """Whether a claim is still recorded for the pod (it must be unprepared when the pod ends)."""
        with self._lock:
            return any(pod_uid in c.pods for c in self._claims.values())

    def prepare(self, pod: Pod) -> tuple[str, ...]:
        """Prepare what the pod's containers use; the CDI device IDs of its claims. Raises
        PrepareFailed (nothing of the pod runs then; the caller retries)."""
        with self._lock:
            wanted = [self._claim_of(pod, name) for name in self._claim_names(pod)]
            for claim in wanted:
                known = self._claims.get(claim.meta.uid)
                if known is None:
                    assert claim.allocation is not None  # _claim_of checked it
                    drivers: dict[str, tuple[PreparedDevice, ...] | None] = {
                        r.driver: None for r in claim.allocation.results
                    }
                    known = ClaimState(
                        claim.meta.uid, claim.meta.namespace, claim.meta.name, frozenset(), drivers, not drivers
                    )
                self._claims[known.uid] = replace(known, pods=known.pods | {pod.uid})
            self._save()  # before the calls: a prepared claim is never forgotten
            batches: dict[str, list[ClaimState]] = {}
            for claim in wanted:
                state = self._claims[claim.meta.uid]
                if not state.prepared:
                    for driver in state.drivers:
                        batches.setdefault(driver, []).append(state)
            for driver, states in sorted(batches.items()):
                self._prepare_with(driver, states)
            self._save()
            return tuple(i for claim in wanted for i in self._claims[claim.meta.uid].cdi_ids())

    def unprepare(self, pod_uid: str) -> None:
        """Release the pod's claims: those no other pod uses are unprepared by their drivers.
        Raises PrepareFailed (what failed stays recorded; the caller retries)."""
        with self._lock:
            mine = [c for c in self._claims.values() if pod_uid in c.pods]
            last = [c for c in mine if c.pods == {pod_uid}]
            for c in mine:
                if c not in last:
                    self._claims[c.uid] = replace(c, pods=c.pods - {pod_uid})
            batches: dict[str, list[ClaimState]] = {}
            for c in last:
                if not c.drivers:
                    del self._claims[c.uid]
                for driver in c.drivers:
                    batches.setdefault(driver, []).append(c)
            try:
                for driver, states in sorted(batches.items()):
                    self._unprepare_with(driver, states)
            finally:
                self._save()

    def reconcile(self, live_pods: Iterable[str]) -> None:
        """Unprepare the claims of pods that are gone (deleted while the agent was down, or
        removed behind its back). Raises PrepareFailed for the first that fails."""
        live = set(live_pods)
        with self._lock:
            gone = {p for c in self._claims.values() for p in c.pods} - live
        for pod_uid in sorted(gone):
            log.info("Unpreparing the claims of a pod that is gone", extra={"podUID": pod_uid})
            self.unprepare(pod_uid)

    # --- steps ---------------------------------------------------------------------------------------
    @staticmethod
    def _claim_names(pod: Pod) -> list[str]:
        used = _used_claims(pod)
        names = []
        for pc in pod.resource_claims:
            name = pod.claim_name(pc)
            if name is None or pc.name not in used:
                continue  # none needed (the controller said so), or no container uses it
            if not name:
                raise PrepareFailed(f"pod {pod.key}: ResourceClaim for {pc.name!r} not created yet")
            names.append(name)
        return names

    def _claim_of(self, pod: Pod, name: str) -> ResourceClaim:
        try:
            claim = ResourceClaim.from_dict(self._get_claim(pod.namespace, name))
        except errors.APIError as e:
            raise PrepareFailed(f"failed to fetch ResourceClaim {name} referenced by pod {pod.name}: {e}") from e
        except TesseraError as e:
            raise PrepareFailed(f"ResourceClaim {name} referenced by pod {pod.name} does not parse: {e}") from e
        templated = any(pc.resource_claim_template_name and pod.claim_name(pc) == name for pc in pod.resource_claims)
        if templated and not _is_for_pod(claim, pod):
            raise PrepareFailed(
                f"ResourceClaim {pod.namespace}/{name} was not created for pod {pod.key} (pod is not owner)"
            )
        if not any(r.resource == "pods" and r.uid == pod.uid for r in claim.reserved_for):
            raise PrepareFailed(
                f"pod {pod.name} ({pod.uid}) is not allowed to use ResourceClaim {name} ({claim.meta.uid})"
            )
        if claim.allocation is None:
            raise PrepareFailed(f"ResourceClaim {pod.namespace}/{name} is not allocated")
        return claim

    def _plugin(self, driver: str, verb: str) -> DRAPluginClient:
        if self._plugins is None:
            from agent.kubeletsim.draclient import PluginWatcher

            self._plugins = PluginWatcher(self.registry_dir)
        plugin = self._plugins.plugin(driver)
        if plugin is None:
            raise PrepareFailed(f"{verb} dynamic resources: DRA driver {driver} is not registered")
        return plugin

    def _call(self, driver: str, verb: str, rpc: str, call: Callable[[DRAPluginClient], R]) -> R:
        """`call` on the driver's plugin; a failure of the whole call as kubelet says it."""
        import grpc

        plugin = self._plugin(driver, verb)
        try:
            return call(plugin)
        except grpc.RpcError as e:
            raise PrepareFailed(f"{verb} dynamic resources: {rpc}: {_rpc_error(e)}") from e

    def _prepare_with(self, driver: str, states: list[ClaimState]) -> None:
        refs = [s.ref() for s in states]
        answer = self._call(driver, "prepare", "NodePrepareResources", lambda plugin: plugin.prepare(refs))
        for s in states:
            if s.uid not in answer.claims:
                raise PrepareFailed(f"prepare dynamic resources: NodePrepareResources skipped ResourceClaim {s.name}")
            result = answer.claims[s.uid]
            if result.error:
                raise PrepareFailed(
                    f"prepare dynamic resources: NodePrepareResources failed for ResourceClaim {s.name}: {result.error}"
                )
            devices = tuple(
                PreparedDevice(d.pool_name, d.device_name, tuple(d.request_names), tuple(d.cdi_device_ids))
                for d in result.devices
            )
            current = self._claims[s.uid]
            drivers = {**current.drivers, driver: devices}
            answered = all(k == driver or v is not None for k, v in current.drivers.items())
            self._claims[s.uid] = replace(current, drivers=drivers, prepared=answered)
            log.info(
                "Prepared ResourceClaim (SIMULATED kubelet)",
                extra={"claim": f"{s.namespace}/{s.name}", "driver": driver},
            )

    def _unprepare_with(self, driver: str, states: list[ClaimState]) -> None:
        refs = [s.ref() for s in states]
        answer = self._call(driver, "unprepare", "NodeUnprepareResources", lambda plugin: plugin.unprepare(refs))
        for s in states:
            result = answer.claims.get(s.uid)
            if result is None or result.error:
                why = "skipped it" if result is None else f"failed: {result.error}"
                raise PrepareFailed(
                    f"unprepare dynamic resources: NodeUnprepareResources for ResourceClaim {s.name} {why}"
                )
            current = self._claims[s.uid]
            rest = {k: v for k, v in current.drivers.items() if k != driver}
            if rest:
                self._claims[s.uid] = replace(current, drivers=rest)
            else:
                del self._claims[s.uid]
                log.info("Unprepared ResourceClaim (SIMULATED kubelet)", extra={"claim": f"{s.namespace}/{s.name}"})

    def _save(self) -> None:
        try:
            self._states.save(self._claims)
        except OSError as e:
            raise PrepareFailed(f"failed to checkpoint claim info state: {e}") from e


def _rpc_error(e: grpc.RpcError) -> str:
    import grpc

    details = e.details() if isinstance(e, grpc.Call) else ""
    code = e.code() if isinstance(e, grpc.Call) else None
    return f"rpc error: code = {code.name if code else 'Unknown'} desc = {details or e}"
