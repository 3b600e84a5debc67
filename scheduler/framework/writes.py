"""The API writes PreBind asks for: values, made by whoever binds the pod.

A PreBind plugin says *what* to write, never writes. The live scheduler's binder makes the writes
on its own threads before it posts the Binding, and when the binding fails it takes back the
ones it made (each `ObjectWrite.undo`, newest first) before the cycle's Unreserve gives back what
Reserve took; the offline scheduler applies the pod's annotations in memory. Two kinds:

- `PodAnnotations`: annotations to set (a value) or remove (None) on the pod being bound — on
  the Reservation, for a Reservation's reserve pod. One binding's are merged into one patch,
  made first (plugins in profile order; a later plugin's value for a key wins).
- `ObjectWrite`: a merge patch of another object (a ResourceClaim's status, say), with the
  write that takes it back; or the creation of an object (`verb` "create": `patch` is the whole
  object; the claim for a pod's extended resources), undone by its deletion (`verb` "delete").

A pod annotation written for a binding that then failed is not taken back at once: the next
attempt's PreBind replaces it before that attempt binds, and the failure reporter removes a
record of holdings left on a pending pod (conditional on the pod's version). An `ObjectWrite`
says how it is undone, because nothing else would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.extension.names import GroupVersionResource

__all__ = ["ObjectWrite", "PodAnnotations", "Write", "Writes"]


@dataclass(frozen=True, slots=True)
class PodAnnotations:
    """Annotations to set (a value) or remove (None) on the pod being bound."""

    changes: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class ObjectWrite:
    """A merge patch of `resource` `namespace/name` (its `subresource`, e.g. "status"), and the
    write that takes it back when the binding fails after it was made (None: nothing to undo).
    `verb` "create": `patch` is the object to create; "delete": delete it (`patch` unused)."""

    resource: GroupVersionResource
    name: str
    patch: Mapping[str, object]
    namespace: str = ""
    subresource: str = ""
    undo: ObjectWrite | None = None
    verb: str = "patch"

    def describe(self) -> str:
        """`resourceclaims default/gpu-claim (status)`: how logs name the object written."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.resource.plural} {where}" + (f" ({self.subresource})" if self.subresource else "")


#: One write a PreBind plugin asks for.
Write = PodAnnotations | ObjectWrite


@dataclass(frozen=True, slots=True)
class Writes:
    """Everything one binding writes before the Binding: the pod's annotations (one patch), then
    the other objects, in the order asked for."""

    annotations: Mapping[str, str | None] = field(default_factory=dict)
    objects: tuple[ObjectWrite, ...] = ()

    @classmethod
    def of(cls, writes: Iterable[Write]) -> Writes:
        annotations: dict[str, str | None] = {}
        objects: list[ObjectWrite] = []
        for write in writes:
            if isinstance(write, PodAnnotations):
                annotations.update(write.changes)
            else:
                objects.append(write)
        return cls(annotations, tuple(objects))

    @property
    def set_annotations(self) -> dict[str, str]:
        """The annotations set (removals left out): what the bound pod carries of them."""
        return {key: value for key, value in self.annotations.items() if value is not None}
