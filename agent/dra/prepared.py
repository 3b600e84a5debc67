"""What the DRA plugin prepared, and the checkpoint that keeps it through restarts.

A prepared claim is what the plugin answered kubelet with (its devices and CDI names) plus what
it holds in Koordinator's terms per GPU (for the device ledger and the CDI spec's limits). The
plugin records a claim here *before* it writes the claim's CDI spec and answers kubelet, and
removes it only after the spec is gone, so after a kill -9 at any point:

- a claim in the checkpoint is held again at start-up (`DeviceLedger.restore`) and its CDI spec
  written again; kubelet's retried NodePrepareResources gets the same answer, nothing is prepared
  twice; its NodeUnprepareResources releases it;
- a CDI spec of the plugin's kind without a claim in the checkpoint is removed at start-up.

The file (`dra-claims.json` in the agent's `--state-dir`) is replaced atomically and durably
(`kube.lifecycle.write_durably`), as the GPU faults file is:

    {"version": 1, "claims": {"<uid>": {"namespace": "ns", "name": "c", "devices": [...]}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent.ledger import Claim, claim_key
from apis.crds.device import DeviceType
from apis.errors import TesseraError
from apis.extension import names
from apis.extension.allocation import DeviceAllocation
from kube.lifecycle import read_versioned, write_versioned

__all__ = ["FILE_NAME", "Checkpoint", "CheckpointError", "PreparedClaim", "PreparedDevice"]

FILE_NAME: Final = "dra-claims.json"
VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One allocated device of a prepared claim (one `status.allocation.devices.results[]` entry
    of this driver), with the GPU it is and what of it the claim holds."""

    request: str
    pool: str
    device: str
    minor: int
    share_id: str = ""
    admin_access: bool = False
    #: Percent of the GPU's compute (100 for a device held whole).
    cores: int = 100
    #: Bytes of GPU memory held, and the GPU's total.
    memory: int = 0
    total_memory: int = 0

    @property
    def shared(self) -> bool:
        return bool(self.share_id) and (self.cores < 100 or self.memory < self.total_memory)

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "pool": self.pool,
            "device": self.device,
            "minor": self.minor,
            "shareID": self.share_id,
            "adminAccess": self.admin_access,
            "cores": self.cores,
            "memory": self.memory,
            "totalMemory": self.total_memory,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PreparedDevice:
        return cls(
            request=str(d["request"]),
            pool=str(d["pool"]),
            device=str(d["device"]),
            minor=int(d["minor"]),
            share_id=str(d.get("shareID", "")),
            admin_access=bool(d.get("adminAccess", False)),
            cores=int(d["cores"]),
            memory=int(d["memory"]),
            total_memory=int(d["totalMemory"]),
        )


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    #: The isolation the claim's opaque configuration asks for ("" or "HAMi-core").
    isolation: str = ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def gpus(self) -> tuple[DeviceAllocation, ...]:
        """What the claim holds per GPU, in Koordinator's terms, in the order of its results
        (admin access holds nothing): a GPU held whole names no resource, as a whole-GPU
        Koordinator allocation reads; shares of one GPU add up."""
        held: dict[int, dict[str, int]] = {}
        whole: set[int] = set()
        for d in self.devices:
            if d.admin_access:
                continue
            if not d.share_id:
                whole.add(d.minor)
                held.setdefault(d.minor, {})
                continue
            into = held.setdefault(d.minor, {})
            into[names.GPU_CORE] = into.get(names.GPU_CORE, 0) + d.cores
            into[names.GPU_MEMORY] = into.get(names.GPU_MEMORY, 0) + d.memory
        out = []
        for minor, res in held.items():
            total = next(d.total_memory for d in self.devices if d.minor == minor)
            if minor in whole or not res:
                out.append(DeviceAllocation(minor))
                continue
            ratio = -(-res[names.GPU_MEMORY] * 100 // total) if total else 100
            out.append(DeviceAllocation(minor, {**res, names.GPU_MEMORY_RATIO: ratio}))
        return tuple(out)

    def ledger_claim(self) -> Claim:
        """The claim as the device ledger counts it (keyed apart from pods)."""
        gpus = self.gpus()
        return Claim(claim_key(self.uid), f"resourceclaim {self.ref}", {DeviceType.GPU: gpus} if gpus else {})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"namespace": self.namespace, "name": self.name}
        out["devices"] = [d.to_dict() for d in self.devices]
        if self.isolation:
            out["isolation"] = self.isolation
        return out

    @classmethod
    def from_dict(cls, uid: str, d: Mapping[str, Any]) -> PreparedClaim:
        return cls(
            uid=uid,
            namespace=str(d["namespace"]),
            name=str(d["name"]),
            devices=tuple(PreparedDevice.from_dict(x) for x in d["devices"]),
            isolation=str(d.get("isolation", "")),
        )


class CheckpointError(TesseraError):
    """The checkpoint exists but cannot be read or is not what `Checkpoint.save` writes."""


class Checkpoint:
    """The prepared claims' file in one state directory. One writer (the plugin, under its lock)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def load(self) -> dict[str, PreparedClaim]:
        """Claim UID -> prepared claim; empty without a file. Raises CheckpointError for a file
        that does not parse (the agent then refuses to start: forgetting a prepared claim could
        give its GPU share twice)."""
        try:
            found = read_versioned(
                self.path,
                VERSION,
                lambda doc: {str(u): PreparedClaim.from_dict(str(u), c) for u, c in doc["claims"].items()},
            )
        except ValueError as e:
            raise CheckpointError(
                f"DRA checkpoint {self.path}: {e}; move it away only once no pod on this node uses a ResourceClaim"
            ) from e
        return found or {}

    def save(self, claims: Mapping[str, PreparedClaim]) -> None:
        """Replace the file with `claims`, atomically and durably. Raises OSError."""
        write_versioned(self.path, VERSION, {"claims": {uid: c.to_dict() for uid, c in sorted(claims.items())}})
