"""A prepared claim as a CDI spec, and the agent's spec files in the CDI directory.

One spec file per claim, `gpu.tessera.dev-claim_<uid>.json`, of kind `gpu.tessera.dev/claim`
(`apis.cdi` has the format). Each allocated device is one CDI device, `<claim uid>-<device>`,
whose edit is its GPU's device node (`/dev/nvidia<minor>`, from `dev_root` on the host). What any
container using the claim needs once goes in the spec's own edits:

- the driver's control nodes, `/dev/nvidiactl` and `/dev/nvidia-uvm`;
- `NVIDIA_VISIBLE_DEVICES` = the claim's GPU minors in result order, as the GPU env hook sets it;
- for a share, the limits in HAMi-core's variables (`hamicore.share_limits`), as the hook gives a
  shared Koordinator pod; with the claim's opaque configuration `{"isolation": "HAMi-core"}` for
  this driver, HAMi-core's full setup instead: the limits, `LD_PRELOAD` and the bind mounts of
  its library and lock directory (`hamicore.isolation`, as a labelled Koordinator pod gets).

The environment is per claim, so a container should use one claim of this driver (two claims'
`NVIDIA_VISIBLE_DEVICES` would overwrite each other; docs/user/dra.md says so).
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Final

from agent.dra.prepared import PreparedClaim
from agent.hooks import hamicore
from agent.hooks.gpu import ENV_VISIBLE_DEVICES
from agent.hooks.hamicore import HAMiCore
from apis import cdi
from apis.dra.gpus import DRIVER
from kube.lifecycle import write_durably

__all__ = ["CLAIM_KIND", "CONTROL_NODES", "ISOLATION_HAMI_CORE", "CDIDir", "device_id", "spec_for"]

CLAIM_KIND: Final = f"{DRIVER}/claim"
#: Device nodes every container with an NVIDIA GPU needs besides its GPUs'.
CONTROL_NODES: Final = ("nvidiactl", "nvidia-uvm")
#: The opaque configuration value asking for HAMi-core isolation of a claim's shares.
ISOLATION_HAMI_CORE: Final = "HAMi-core"
_FILE: Final = re.compile(rf"^{re.escape(DRIVER)}-claim_(?P<uid>[A-Za-z0-9-]+)\.json$")


def _device_name(uid: str, device: str) -> str:
    return f"{uid}-{device}"


def device_id(uid: str, device: str) -> str:
    """The qualified CDI name of one device of a claim."""
    return cdi.qualified(CLAIM_KIND, _device_name(uid, device))


def spec_for(claim: PreparedClaim, *, dev_root: Path, hami_core: HAMiCore, isolation: str = "") -> cdi.Spec:
    """The CDI spec of a prepared claim (see the module). Raises HookError (from hamicore) when
    the claim's shares lack what their limits need."""
    devices = []
    for d in claim.devices:
        node = cdi.DeviceNode(f"/dev/nvidia{d.minor}", str(dev_root / f"nvidia{d.minor}"))
        devices.append(cdi.SpecDevice(_device_name(claim.uid, d.device), cdi.ContainerEdits(device_nodes=(node,))))
    unique = tuple({d.name: d for d in devices}.values())
    minors = list(dict.fromkeys(d.minor for d in claim.devices))
    env = {ENV_VISIBLE_DEVICES: ",".join(map(str, minors))}
    mounts: tuple[cdi.Mount, ...] = ()
    gpus = claim.gpus()
    if gpus and hamicore.is_shared(gpus):
        if isolation == ISOLATION_HAMI_CORE:
            # One spec serves every container of the claim: no per-container monitor cache.
            setup = hamicore.isolation(
                replace(hami_core, vgpu_monitor=False), gpus, pod=f"claim {claim.ref}", pod_uid="", container=""
            )
            if setup is not None:
                env.update(setup.envs)
                mounts = tuple(cdi.Mount(m.source, m.destination, "bind", ("rbind",)) for m in setup.mounts)
        else:
            env.update(hamicore.share_limits(gpus, pod=f"claim {claim.ref}"))
    control = tuple(cdi.DeviceNode(f"/dev/{name}", str(dev_root / name)) for name in CONTROL_NODES)
    edits = cdi.ContainerEdits(env=cdi.env_entries(env), device_nodes=control, mounts=mounts)
    return cdi.Spec(kind=CLAIM_KIND, devices=unique, edits=edits)


class CDIDir:
    """The agent's spec files in one CDI directory (`/var/run/cdi` by default)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, uid: str) -> Path:
        return self.directory / f"{DRIVER}-claim_{uid}.json"

    def write(self, uid: str, spec: cdi.Spec) -> None:
        """Write (or replace) the claim's spec atomically: a runtime never reads half a spec.
        Raises OSError."""
        write_durably(self.path(uid), json.dumps(spec.to_dict(), indent=1) + "\n")

    def remove(self, uid: str) -> None:
        """Remove the claim's spec. Idempotent; raises OSError when it cannot."""
        with contextlib.suppress(FileNotFoundError):
            self.path(uid).unlink()

    def claims(self) -> set[str]:
        """The UIDs of the claims that have a spec file of the agent's here."""
        try:
            entries = list(self.directory.iterdir())
        except FileNotFoundError:
            return set()
        return {m["uid"] for p in entries if (m := _FILE.match(p.name))}
