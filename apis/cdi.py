"""The Container Device Interface (CDI): spec files that tell a container runtime what a device is.

A DRA driver answers kubelet's NodePrepareResources with CDI device names
(`vendor.example/class=name`); kubelet passes them to the runtime in CRI's
`ContainerConfig.CDI_devices`, and a runtime that knows CDI looks each name up in the spec files
of its spec directories (`/etc/cdi`, `/var/run/cdi`; JSON or YAML) and applies the edits: the
spec's own `containerEdits` once when any of its devices is asked for, and the device's. The
agent (`agent.dra`) writes specs; the runtime proxy (`runtimeproxy.cdi`) applies them for
runtimes that do not (containerd before 1.7.2 ignores the CRI field).

Field names follow the CDI specification (cncf-tags/container-device-interface, SPEC.md). Only
the edits Tessera writes and the proxy can apply are typed — `env`, `deviceNodes`, `mounts`;
other edits (`hooks`, `intelRdt`, `additionalGids`, `netDevices`) are kept by name in
`ContainerEdits.other` so that an applier can refuse them instead of silently dropping them.
Pure: parsing and serialising, no file I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis import _fields as f
from apis.errors import ValidationError

__all__ = [
    "SPEC_VERSION",
    "ContainerEdits",
    "DeviceNode",
    "Mount",
    "Spec",
    "SpecDevice",
    "env_entries",
    "parse_qualified",
    "qualified",
]

#: The CDI version Tessera writes: 0.5.0 brought `deviceNodes[].hostPath` and device names that
#: start with a digit (claim UIDs do), and every CDI-aware runtime in use reads it.
SPEC_VERSION: Final = "0.5.0"

# kind = "<vendor: DNS subdomain>/<class>"; device names: alphanumeric at both ends, `-_.:` inside.
_VENDOR = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_CLASS = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")

_OTHER_EDITS: Final = ("hooks", "intelRdt", "additionalGids", "additionalGIDs", "netDevices")


def qualified(kind: str, name: str) -> str:
    """The fully qualified device name `vendor/class=name`."""
    return f"{kind}={name}"


def parse_qualified(device: str) -> tuple[str, str]:
    """(kind, name) of `vendor/class=name`; ValidationError for anything else."""
    kind, sep, name = device.partition("=")
    vendor, slash, klass = kind.partition("/")
    if not sep or not slash:
        raise ValidationError("CDI device", f"{device!r} is not a qualified name vendor/class=name")
    for part, pattern, what in ((vendor, _VENDOR, "vendor"), (klass, _CLASS, "class"), (name, _NAME, "name")):
        if not pattern.match(part):
            raise ValidationError("CDI device", f"{device!r}: invalid {what} {part!r}")
    return kind, name


@dataclass(frozen=True, slots=True)
class DeviceNode:
    """A device node to create in the container: `path` inside, `host_path` on the host (the
    same as `path` when empty), cgroup `permissions` (`rwm` when empty)."""

    path: str
    host_path: str = ""
    permissions: str = ""

    @property
    def source(self) -> str:
        return self.host_path or self.path

    @classmethod
    def from_dict(cls, raw: object, path: str) -> DeviceNode:
        d = f.mapping(raw, path)
        node = cls(f.string(d, "path", path), f.string(d, "hostPath", path), f.string(d, "permissions", path))
        if not node.path:
            raise ValidationError(f"{path}.path", "required")
        return node

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty({"path": self.path, "hostPath": self.host_path, "permissions": self.permissions})


@dataclass(frozen=True, slots=True)
class Mount:
    """A mount: `host_path` at `container_path`, with OCI mount `type` and `options`."""

    host_path: str
    container_path: str
    type: str = ""
    options: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: object, path: str) -> Mount:
        d = f.mapping(raw, path)
        mount = cls(
            f.string(d, "hostPath", path),
            f.string(d, "containerPath", path),
            f.string(d, "type", path),
            f.strings(d, "options", path),
        )
        if not mount.host_path or not mount.container_path:
            raise ValidationError(path, "hostPath and containerPath are required")
        return mount

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hostPath": self.host_path, "containerPath": self.container_path}
        if self.type:
            out["type"] = self.type
        if self.options:
            out["options"] = list(self.options)
        return out


@dataclass(frozen=True, slots=True)
class ContainerEdits:
    #: `NAME=value` entries, appended to the container's environment in order.
    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    #: Edits of other kinds present (non-empty) in the spec, by their field name.
    other: tuple[str, ...] = ()

    def env_map(self) -> dict[str, str]:
        """The env entries as a mapping (a later entry wins, as in an OCI environment)."""
        return dict(entry.partition("=")[::2] for entry in self.env)

    @classmethod
    def from_dict(cls, raw: object, path: str) -> ContainerEdits:
        d = f.mapping(raw, path)
        env = f.strings(d, "env", path)
        for i, entry in enumerate(env):
            if "=" not in entry or entry.startswith("="):
                raise ValidationError(f"{path}.env[{i}]", f"{entry!r} is not NAME=value")
        return cls(
            env=env,
            device_nodes=tuple(
                DeviceNode.from_dict(x, f"{path}.deviceNodes[{i}]")
                for i, x in enumerate(f.items(d, "deviceNodes", path))
            ),
            mounts=tuple(Mount.from_dict(x, f"{path}.mounts[{i}]") for i, x in enumerate(f.items(d, "mounts", path))),
            other=tuple(name for name in _OTHER_EDITS if d.get(name)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.env:
            out["env"] = list(self.env)
        if self.device_nodes:
            out["deviceNodes"] = [n.to_dict() for n in self.device_nodes]
        if self.mounts:
            out["mounts"] = [m.to_dict() for m in self.mounts]
        return out


@dataclass(frozen=True, slots=True)
class SpecDevice:
    name: str
    edits: ContainerEdits = ContainerEdits()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "containerEdits": self.edits.to_dict()}


@dataclass(frozen=True, slots=True)
class Spec:
    """One CDI spec (one file): a kind, its devices, and edits for any container using one of them."""

    kind: str
    devices: tuple[SpecDevice, ...]
    edits: ContainerEdits = ContainerEdits()
    version: str = SPEC_VERSION

    def device(self, name: str) -> SpecDevice | None:
        return next((d for d in self.devices if d.name == name), None)

    def qualified_names(self) -> tuple[str, ...]:
        return tuple(qualified(self.kind, d.name) for d in self.devices)

    @classmethod
    def from_dict(cls, raw: object, source: str = "CDI spec") -> Spec:
        """Parse a spec (as loaded from JSON or YAML); ValidationError naming `source` and the field."""
        try:
            d = f.mapping(raw, "spec")
            kind = f.string(d, "kind", "kind")
            version = f.string(d, "cdiVersion", "cdiVersion")
            if not version:
                raise ValidationError("cdiVersion", "required")
            parse_qualified(qualified(kind, "x"))
            devices = []
            for i, x in enumerate(f.items(d, "devices", "devices")):
                dd = f.mapping(x, f"devices[{i}]")
                name = f.string(dd, "name", f"devices[{i}]")
                if not _NAME.match(name):
                    raise ValidationError(f"devices[{i}].name", f"{name!r} is not a CDI device name")
                edits = dd.get("containerEdits")
                devices.append(
                    SpecDevice(
                        name, ContainerEdits() if edits is None else ContainerEdits.from_dict(edits, f"devices[{i}]")
                    )
                )
            if not devices:
                raise ValidationError("devices", "a spec must list at least one device")
            edits = d.get("containerEdits")
            return cls(
                kind=kind,
                devices=tuple(devices),
                edits=ContainerEdits() if edits is None else ContainerEdits.from_dict(edits, "containerEdits"),
                version=version,
            )
        except ValidationError as e:
            raise ValidationError(e.field, e.reason, obj=source) from e

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cdiVersion": self.version,
            "kind": self.kind,
            "devices": [d.to_dict() for d in self.devices],
        }
        edits = self.edits.to_dict()
        if edits:
            out["containerEdits"] = edits
        return out


def env_entries(env: Mapping[str, str]) -> tuple[str, ...]:
    """`NAME=value` entries for a mapping, in its order."""
    return tuple(f"{k}={v}" for k, v in env.items())
