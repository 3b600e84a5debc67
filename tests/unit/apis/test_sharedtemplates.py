"""GPU shared-resource templates (Koordinator's ConfigMap `data.yaml`): parsing and matching."""

from __future__ import annotations

import re

import pytest

from apis.errors import ValidationError
from apis.extension import names, sharedtemplates

GI = 2**30
DATA = {
    "data.yaml": """
huawei-Ascend-310P:
  vir01: {huawei.com/npu-core: 1, huawei.com/npu-cpu: 1, huawei.com/npu-dvpp: 12}
  vir02: {huawei.com/npu-core: 2, huawei.com/npu-cpu: 2, huawei.com/npu-dvpp: 25}
nvidia-A100-SXM4-80GB:
  half: {koordinator.sh/gpu-core: 50, koordinator.sh/gpu-memory-ratio: 50}
  quarter-20g: {koordinator.sh/gpu-core: "25", kubernetes.io/gpu-memory: 20Gi}
"""
}


def test_the_configmap_data_parses_into_base_units_and_current_names() -> None:
    templates = sharedtemplates.parse(DATA)
    assert templates["huawei-Ascend-310P"]["vir02"] == {
        "huawei.com/npu-core": 2,
        "huawei.com/npu-cpu": 2,
        "huawei.com/npu-dvpp": 25,
    }
    assert templates["nvidia-A100-SXM4-80GB"]["quarter-20g"] == {names.GPU_CORE: 25, names.GPU_MEMORY: 20 * GI}


def test_a_share_matches_only_a_template_with_exactly_its_resources() -> None:
    templates = sharedtemplates.parse(DATA)
    half = {names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 50}
    assert sharedtemplates.matching(templates, half) == {"nvidia-A100-SXM4-80GB": {"half": half}}
    assert sharedtemplates.matching(templates, {names.GPU_CORE: 50}) == {}  # a subset is not a match
    assert sharedtemplates.matching(templates, {**half, names.GPU_MEMORY: 40 * GI}) == {}  # nor a superset
    assert sharedtemplates.key("nvidia", "A100-SXM4-80GB") == "nvidia-A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"data.yaml": "a: ["}, "not valid YAML"),
        ({"data.yaml": "[1, 2]"}, "expected a map of <vendor>-<model> to templates"),
        ({"data.yaml": "nvidia-T4: [half]"}, "data[data.yaml].nvidia-T4: expected a map of template name"),
        (
            {"data.yaml": "nvidia-T4: {half: {koordinator.sh/gpu-core: lots}}"},
            "nvidia-T4.half[koordinator.sh/gpu-core]",
        ),
    ],
    ids=["yaml", "not-a-map", "templates-not-a-map", "bad-quantity"],
)
def test_bad_data_is_an_error_naming_where(data: dict[str, str], where: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(where)):
        sharedtemplates.parse(data, obj="configmap koordinator-system/gpu-shared-resource-templates")


def test_no_data_is_no_templates() -> None:
    assert sharedtemplates.parse({}) == {}
    assert sharedtemplates.parse({"data.yaml": ""}) == {}
