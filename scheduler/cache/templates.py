"""GPU shared-resource templates, as DeviceShare reads them (`apis.extension.sharedtemplates`).

Pure data fed by explicit calls: a plugin says which ConfigMap (`namespace/name`) it reads the
templates from (`want`), its feed (DeviceShare's ConfigMap watch, run by the live scheduler) puts
what it parsed there (`put`, `clear`), and the plugin reads them back (`get`). Offline entry
points (what-if, simulate) feed nothing, so there every model has no template, as in a cluster
without the ConfigMap.
"""

from __future__ import annotations

from apis.extension.sharedtemplates import Templates

__all__ = ["SharedResourceTemplates"]

_NONE: Templates = {}


class SharedResourceTemplates:
    """Templates by the `namespace/name` of the ConfigMap that holds them."""

    def __init__(self) -> None:
        self._wanted: set[str] = set()
        self._by_ref: dict[str, Templates] = {}

    def want(self, ref: str) -> None:
        """A plugin reads the ConfigMap `ref` (`namespace/name`); idempotent."""
        self._wanted.add(ref)

    def wanted(self) -> frozenset[str]:
        """Every ConfigMap a plugin reads, for the feed to watch."""
        return frozenset(self._wanted)

    def put(self, ref: str, templates: Templates) -> None:
        """The templates now in ConfigMap `ref` (replacing what was there)."""
        self._by_ref[ref] = templates

    def clear(self, ref: str) -> None:
        """ConfigMap `ref` is gone: no templates from it."""
        self._by_ref.pop(ref, None)

    def copy_into(self, other: SharedResourceTemplates) -> None:
        """Put every ConfigMap's templates into `other` (a snapshot's restored cache)."""
        other._by_ref.update(self._by_ref)

    def get(self, ref: str) -> Templates:
        """The templates of ConfigMap `ref`; empty when it is absent (or not read yet)."""
        return self._by_ref.get(ref, _NONE)
