"""CDI for runtimes that do not apply it: a container's `CDI_devices` resolved and applied.

kubelet passes a DRA driver's CDI device names in CRI's `ContainerConfig.CDI_devices`; containerd
applies them from 1.7.2 on, but containerd 1.6 (Debian 12's) ignores the field and the container
would start without its devices. With `--apply-cdi` the proxy does it instead, before
forwarding CreateContainer: each name is looked up in the spec files of the CDI directories (a
later directory wins for the same device, as in CDI's registry), the spec's own edits are applied
once per spec and each device's edits after them, and the field is cleared so that a runtime
that does know CDI does not apply them a second time.

The edits go through the same patch as the hooks' answers (`merge.patch_create_container`):
env replaces the container's value of a variable, a device node is added unless the container
has one at that path, a mount replaces one at the same container path. A device no spec names,
a spec that does not parse, or an edit the proxy cannot apply (hooks, intelRdt, additional GIDs,
network devices; a mount CRI cannot carry) fails the create with FAILED_PRECONDITION and the
reason, rather than starting a container without what it asked for.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import yaml
from cri_api.v1 import api_pb2 as cri

from apis import cdi
from apis.errors import TesseraError
from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy.settings import DEFAULT_CDI_SPEC_DIRS

__all__ = ["CDIError", "CDIRegistry", "answer_for", "clear"]

log = logging.getLogger(__name__)

_PERMISSIONS: Final = "rwm"


class CDIError(TesseraError):
    """A container's CDI devices cannot be applied; the message says which and why."""


class CDIRegistry:
    """The CDI specs in `directories`, read afresh for each container that asks (specs come and go
    with claims; a read is a few small files)."""

    def __init__(self, directories: Sequence[Path] = DEFAULT_CDI_SPEC_DIRS) -> None:
        self.directories = tuple(directories)

    def resolve(self, names: Sequence[str]) -> list[tuple[cdi.Spec, cdi.SpecDevice]]:
        """(spec, device) for each qualified name, in order. Raises CDIError."""
        wanted = {cdi.parse_qualified(n)[0] for n in names if _valid(n)}
        specs = self._specs(wanted)
        out = []
        for name in names:
            try:
                kind, device_name = cdi.parse_qualified(name)
            except TesseraError as e:
                raise CDIError(f"CDI device {name!r}: {e}") from e
            found = next(
                ((s, d) for s in reversed(specs) if s.kind == kind and (d := s.device(device_name)) is not None), None
            )
            if found is None:
                where = ", ".join(map(str, self.directories))
                raise CDIError(f"CDI device {name!r} is not in any spec of {where}")
            out.append(found)
        return out

    def _specs(self, kinds: set[str]) -> list[cdi.Spec]:
        """The specs of `kinds`, lowest priority first (directory order, then file name)."""
        specs = []
        for directory in self.directories:
            try:
                files = sorted(p for p in directory.iterdir() if p.suffix in (".json", ".yaml", ".yml"))
            except FileNotFoundError:
                continue
            for path in files:
                try:
                    raw = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
                except (OSError, ValueError, yaml.YAMLError) as e:
                    log.warning("CDI spec file cannot be read; skipped", extra={"file": str(path), "err": str(e)})
                    continue
                if not isinstance(raw, dict) or raw.get("kind") not in kinds:
                    continue
                try:
                    specs.append(cdi.Spec.from_dict(raw, source=str(path)))
                except TesseraError as e:
                    raise CDIError(f"CDI spec {path} does not parse: {e}") from e
        return specs


def _valid(name: str) -> bool:
    try:
        cdi.parse_qualified(name)
    except TesseraError:
        return False
    return True


def answer_for(resolved: Sequence[tuple[cdi.Spec, cdi.SpecDevice]]) -> hook.ContainerResourceHookResponse:
    """The edits as a hook answer (for `merge.patch_create_container`): each spec's own edits once,
    then each device's. Raises CDIError for an edit the proxy cannot apply."""
    edits: list[tuple[str, cdi.ContainerEdits]] = []
    seen: set[int] = set()
    for spec, device in resolved:
        if id(spec) not in seen:
            seen.add(id(spec))
            edits.append((f"CDI spec of {spec.kind}", spec.edits))
        edits.append((f"CDI device {cdi.qualified(spec.kind, device.name)}", device.edits))
    answer = hook.ContainerResourceHookResponse()
    for where, edit in edits:
        if edit.other:
            raise CDIError(f"{where}: edits {', '.join(edit.other)} cannot be applied by the runtime proxy")
        answer.container_envs.update(edit.env_map())
        present = {d.container_path for d in answer.container_devices}
        for node in edit.device_nodes:
            if node.path not in present:
                answer.container_devices.add(
                    container_path=node.path, host_path=node.source, permissions=node.permissions or _PERMISSIONS
                )
                present.add(node.path)
        for mount in edit.mounts:
            kept = [m for m in answer.container_mounts if m.destination != mount.container_path]
            del answer.container_mounts[:]
            answer.container_mounts.extend(kept)
            answer.container_mounts.add(
                destination=mount.container_path,
                type="bind" if mount.type in ("", "none", "bind") else mount.type,
                source=mount.host_path,
                options=list(mount.options),
            )
    return answer


def clear(config: cri.ContainerConfig) -> None:
    """Drop the CDI names once applied (a CDI-aware runtime must not apply them again)."""
    del config.CDI_devices[:]
