"""DeviceClasses: kube-apiserver's validation of a class's selectors, configuration and the
extended resource it may serve (`extendedResourceName`: a plain `nvidia.com/gpu: 1` pod served
through DRA). A class may change (its selectors apply to claims allocated afterwards)."""

from __future__ import annotations

from typing import Any

from apiserver.dra import checks
from apiserver.dra.checks import mapping, objects
from apiserver.errors import Cause
from apiserver.strategy import Strategy
from apiserver.validation import qualified_name

__all__ = ["DeviceClassStrategy", "is_extended_resource_name"]


def is_extended_resource_name(name: str) -> bool:
    """kube's IsExtendedResourceName: a domain-qualified name outside `kubernetes.io`, which a
    container may ask for as `requests.<name>` too."""
    domain, slash, _ = name.partition("/")
    if not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or name.startswith("requests."):
        return False
    return not qualified_name("requests." + name)


class DeviceClassStrategy(Strategy):
    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = mapping(obj.get("spec"))
        causes += checks.selectors(spec.get("selectors"), "spec.selectors")
        config = objects(spec.get("config"))
        causes += checks.bounded(config, checks.DEVICE_CONFIG_MAX, "spec.config")
        for i, entry in enumerate(config):
            causes += checks.device_configuration(mapping(entry), f"spec.config[{i}]")
        extended = spec.get("extendedResourceName")
        if extended is not None and not (isinstance(extended, str) and is_extended_resource_name(extended)):
            causes.append(
                Cause.invalid("spec.extendedResourceName", str(extended), "must be a valid extended resource name")
            )
        return causes
