"""Tessera's error tree: one root, so callers can tell our failures from bugs.

    TesseraError
    ├── ConfigError            bad settings, found at start-up (never mid-cycle)
    ├── InvalidRequestError    a pod asks for something the protocol does not allow
    ├── QuantityError          a string that is not a Kubernetes quantity (also a ValueError)
    ├── AnnotationError        a malformed label/annotation value on an object (key, obj)
    ├── ValidationError        a malformed object (CR or core object) at the parse boundary
    └── DiscoveryError         a node-side probe failed (NVML, sysfs, netlink)

`kube.APIError` (NotFound, Conflict, ...) also derives from TesseraError; it lives in `kube/`
because only `kube/` talks to an API server. Every message names the object, the value and the
rule, and those are kept as attributes so callers never parse messages.
"""

from __future__ import annotations

__all__ = [
    "AnnotationError",
    "ConfigError",
    "DiscoveryError",
    "InvalidRequestError",
    "QuantityError",
    "TesseraError",
    "ValidationError",
]


class TesseraError(Exception):
    """Root of every error Tessera raises on purpose."""


class ConfigError(TesseraError):
    """Settings or plugin arguments are invalid; raised at start-up."""


class InvalidRequestError(TesseraError):
    """A pod's resource request breaks the protocol's request rules.

    `resources` names the offending resource names, so a caller can point at them.
    """

    def __init__(self, message: str, *, resources: tuple[str, ...] = (), obj: str = "") -> None:
        prefix = f"pod {obj}: " if obj else ""
        super().__init__(f"{prefix}invalid device request: {message}")
        self.reason = message
        self.resources = resources
        self.obj = obj


class QuantityError(TesseraError, ValueError):
    """The text is not a Kubernetes quantity."""

    def __init__(self, text: object, reason: str) -> None:
        super().__init__(f"quantity {text!r}: {reason}")
        self.text = text
        self.reason = reason


class AnnotationError(TesseraError):
    """A label or annotation value on an object cannot be parsed."""

    def __init__(self, key: str, reason: str, *, obj: str = "") -> None:
        where = f"{obj}: " if obj else ""
        super().__init__(f"{where}annotation {key}: {reason}")
        self.key = key
        self.reason = reason
        self.obj = obj


class ValidationError(TesseraError):
    """An object (as parsed from Kubernetes JSON) breaks its schema.

    `field` is a JSON path such as `spec.devices[2].minor`.
    """

    def __init__(self, field: str, reason: str, *, obj: str = "") -> None:
        where = f"{obj}: " if obj else ""
        super().__init__(f"{where}{field}: {reason}")
        self.field = field
        self.reason = reason
        self.obj = obj


class DiscoveryError(TesseraError):
    """A device discovery source failed; the agent logs it and keeps going."""
