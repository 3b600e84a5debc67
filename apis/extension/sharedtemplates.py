"""GPU shared-resource templates: the only shares some GPU models may be cut into.

Koordinator's DeviceShare reads them from a ConfigMap (by default
`koordinator-system/gpu-shared-resource-templates`, its `gpuSharedResourceTemplatesConfig`
scheduler argument), whose key `data.yaml` maps `<vendor>-<model>` (the node labels
`node.koordinator.sh/gpu-vendor` and `gpu-model`) to named templates, each a ResourceList of one
GPU's share:

    huawei-Ascend-310P:
      vir01: {huawei.com/npu-core: 1, huawei.com/npu-cpu: 1, huawei.com/npu-dvpp: 12}
      vir02: {huawei.com/npu-core: 2, huawei.com/npu-cpu: 2, huawei.com/npu-dvpp: 25}

A pod asking for a share of a GPU that names any of the argument's `matchedResources` (by default
`huawei.com/npu-core`) must ask, per GPU, for exactly one template's resources — the same names
and amounts — or it is unschedulable ("no matched GPU shared resource template"); and it goes only
to nodes whose model has such a template. Pure: `parse` the ConfigMap's data, then `matching`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import yaml

from apis.errors import ValidationError
from apis.extension import deprecated
from apis.k8s import resources

__all__ = ["DATA_KEY", "Templates", "key", "matching", "parse"]

#: The ConfigMap key Koordinator reads the templates from.
DATA_KEY: Final = "data.yaml"

#: `<vendor>-<model>` -> template name -> one GPU's share (base units).
Templates = Mapping[str, Mapping[str, Mapping[str, int]]]


def key(vendor: str, model: str) -> str:
    """The templates' key for a node's GPU vendor and model, as Koordinator builds it."""
    return f"{vendor}-{model}"


def parse(data: Mapping[str, str], *, obj: str = "") -> Templates:
    """The templates in a ConfigMap's `data` (none when it has no `data.yaml`). Raises
    ValidationError naming the key, template and resource that do not parse."""
    text = data.get(DATA_KEY)
    if text is None:
        return {}
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValidationError(f"data[{DATA_KEY}]", f"not valid YAML: {e}", obj=obj) from e
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ValidationError(f"data[{DATA_KEY}]", "expected a map of <vendor>-<model> to templates", obj=obj)
    out: dict[str, dict[str, Mapping[str, int]]] = {}
    for model, templates in doc.items():
        where = f"data[{DATA_KEY}].{model}"
        if not isinstance(templates, Mapping):
            raise ValidationError(where, "expected a map of template name to resources", obj=obj)
        out[str(model)] = {}
        for name, raw in templates.items():
            parsed = resources.parse_list(raw, field=f"{where}.{name}", obj=obj)
            out[str(model)][str(name)] = deprecated.to_current(parsed)
    return out


def matching(templates: Templates, per_gpu: Mapping[str, int]) -> dict[str, dict[str, Mapping[str, int]]]:
    """Per model key, the templates whose resources are exactly `per_gpu` (Koordinator's strict
    match: the same names, the same amounts); models without one are left out."""
    wanted = dict(per_gpu)
    out: dict[str, dict[str, Mapping[str, int]]] = {}
    for model, named in templates.items():
        found = {name: share for name, share in named.items() if dict(share) == wanted}
        if found:
            out[model] = found
    return out
