"""Koordinator's node rules for pods asking for a share of a GPU: the isolation provider
(`koordinator.sh/gpu-isolation-provider`) the pod names must be the node's, and the node's GPU
model must not be in `gpuShareUnsupportedModels`."""

from __future__ import annotations

import dataclasses

import pytest

from apis.crds.device import Device
from apis.errors import ConfigError
from apis.extension import names
from apis.k8s.core import Node
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.framework.status import Code
from scheduler.plugins.deviceshare import DeviceShareArgs
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_scheduler

HAMI = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}
NO_HAMI = (
    "GPU isolation provider HAMi-core not found on the node "
    "(pod label koordinator.sh/gpu-isolation-provider=HAMi-core, node label: none)"
)


def labelled(node: tuple[Node, Device], labels: dict[str, str]) -> tuple[Node, Device]:
    n, d = node
    return dataclasses.replace(n, meta=dataclasses.replace(n.meta, labels={**n.meta.labels, **labels})), d


def test_a_hami_core_share_goes_only_to_a_hami_core_node() -> None:
    scheduler = make_scheduler(make_node("plain"), labelled(make_node("hami"), HAMI))
    outcome = scheduler.schedule_one(make_pod("infer", labels=HAMI, gpu_core=50, gpu_ratio=50))
    assert outcome.node == "hami"


def test_the_refusal_is_unresolvable_and_names_both_labels() -> None:
    scheduler = make_scheduler(
        make_node("plain"), labelled(make_node("other"), {names.LABEL_GPU_ISOLATION_PROVIDER: "X"})
    )
    outcome = scheduler.schedule_one(make_pod("infer", labels=HAMI, gpu_core=50, gpu_ratio=50))
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert outcome.status.message.startswith("0/2 nodes are available: 1 GPU isolation provider HAMi-core not found")
    assert outcome.diagnosis.reasons_by_node() == {
        "other": [NO_HAMI.replace("node label: none", "node label: X")],
        "plain": [NO_HAMI],
    }


@pytest.mark.parametrize(
    ("pod_labels", "amounts"),
    [
        (HAMI, {"nvidia_gpu": 1}),  # a whole GPU: Koordinator checks shared pods only
        (HAMI, {"gpu_core": 100, "gpu_ratio": 100}),
        ({}, {"gpu_core": 50, "gpu_ratio": 50}),  # no provider asked for
        ({names.LABEL_GPU_ISOLATION_PROVIDER: ""}, {"gpu_core": 50, "gpu_ratio": 50}),
    ],
    ids=["whole-gpu", "whole-by-percent", "unlabelled-share", "empty-label"],
)
def test_pods_the_provider_rule_does_not_concern_go_anywhere(
    pod_labels: dict[str, str], amounts: dict[str, int]
) -> None:
    scheduler = make_scheduler(make_node("plain"))
    assert scheduler.schedule_one(make_pod("p", labels=pod_labels, **amounts)).node == "plain"


def test_pods_alike_but_for_the_label_do_not_share_a_filter_result() -> None:
    # Same request shape on the same unchanged node: the memoised result must not leak across labels.
    scheduler = make_scheduler(make_node("plain"))
    assert scheduler.schedule_one(make_pod("a", gpu_core=20, gpu_ratio=20)).node == "plain"
    refused = scheduler.schedule_one(make_pod("b", labels=HAMI, gpu_core=20, gpu_ratio=20))
    assert refused.diagnosis.reasons_by_node() == {"plain": [NO_HAMI]}
    assert scheduler.schedule_one(make_pod("c", gpu_core=20, gpu_ratio=20)).node == "plain"


def test_a_node_labelled_later_takes_the_pod() -> None:
    plain = make_node("n1")
    scheduler = make_scheduler(plain)
    pod = make_pod("infer", labels=HAMI, gpu_core=50, gpu_ratio=50)
    assert not scheduler.schedule_one(pod).scheduled
    scheduler.cache.update_node(labelled(plain, HAMI)[0])
    assert scheduler.schedule_one(pod).node == "n1"


UNSUPPORTED = {"gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "Tesla-T4"}]}


def with_deviceshare_args(args: dict[str, object]) -> SchedulerConfig:
    lines = "\n".join(f"          {k}: {v!r}" for k, v in args.items())
    return load_config(
        f"""
profiles:
  - schedulerName: tessera-scheduler
    pluginConfig:
      - name: DeviceShare
        args:
{lines}
"""
    )


def t4(name: str, **labels: str) -> tuple[Node, Device]:
    node = make_node(name, gpus=2, gpu_model="Tesla-T4", gpu_memory=15 * 2**30)
    return labelled(node, {names.LABEL_GPU_VENDOR: "nvidia", **labels})


def test_a_model_that_must_not_be_shared_takes_whole_gpus_only() -> None:
    config = with_deviceshare_args(UNSUPPORTED)
    scheduler = make_scheduler(t4("t4"), config=config)
    refused = scheduler.schedule_one(make_pod("half", gpu_core=50, gpu_ratio=50))
    assert refused.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert refused.diagnosis.reasons_by_node() == {
        "t4": ['model "Tesla-T4" of vendor "nvidia" does not support GPU Share']
    }
    assert scheduler.schedule_one(make_pod("whole", nvidia_gpu=1)).node == "t4"
    assert (
        make_scheduler(t4("t4")).schedule_one(make_pod("half", gpu_core=50, gpu_ratio=50)).node == "t4"
    )  # default: none


def test_a_node_labelled_only_with_the_deprecated_model_label_is_recognised() -> None:
    node, device = t4("old")
    labels = {k: v for k, v in node.labels.items() if k != names.LABEL_GPU_MODEL}
    old = dataclasses.replace(
        node, meta=dataclasses.replace(node.meta, labels={**labels, names.DEPRECATED_LABEL_GPU_MODEL: "Tesla-T4"})
    )
    scheduler = make_scheduler((old, device), config=with_deviceshare_args(UNSUPPORTED))
    refused = scheduler.schedule_one(make_pod("half", gpu_core=50, gpu_ratio=50))
    assert refused.diagnosis.reasons_by_node() == {
        "old": ['model "Tesla-T4" of vendor "nvidia" does not support GPU Share']
    }


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (
            {"gpuShareUnsupportedModels": {"vendor": "nvidia"}},
            "gpuShareUnsupportedModels: expected a list of {vendor, model}",
        ),
        ({"gpuShareUnsupportedModels": ["T4"]}, r"gpuShareUnsupportedModels\[0\]: expected {vendor, model}"),
        (
            {"gpuShareUnsupportedModels": [{"vendor": "nvidia"}]},
            r"gpuShareUnsupportedModels\[0\]: vendor and model must both be non-empty strings",
        ),
        (
            {"gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "T4", "modle": "x"}]},
            r"gpuShareUnsupportedModels\[0\]: unknown field modle",
        ),
    ],
    ids=["not-a-list", "not-an-object", "no-model", "unknown-field"],
)
def test_bad_unsupported_models_fail_at_startup(raw: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        DeviceShareArgs.from_dict(raw)


def test_unsupported_models_parse_to_vendor_model_pairs() -> None:
    raw = {
        "gpuShareUnsupportedModels": [
            {"vendor": "huawei", "model": "Ascend-310P3-300I-DUO"},
            {"vendor": "nvidia", "model": "Tesla-T4"},
        ]
    }
    assert DeviceShareArgs.from_dict(raw).share_unsupported_models == {
        ("huawei", "Ascend-310P3-300I-DUO"),
        ("nvidia", "Tesla-T4"),
    }


# --- GPU shared-resource templates ----------------------------------------------------------------
TEMPLATES_REF = "koordinator-system/gpu-shared-resource-templates"
#: GPU shares on A100s must be cut as these templates say (matchedResources names gpu-core).
TEMPLATE_ARGS = {"gpuSharedResourceTemplatesConfig": {"matchedResources": [names.GPU_CORE]}}
A100_TEMPLATES = {
    "nvidia-A100-SXM4-80GB": {
        "half": {names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 50},
        "quarter": {names.GPU_CORE: 25, names.GPU_MEMORY_RATIO: 25},
    }
}


def a100(name: str) -> tuple[Node, Device]:
    return labelled(make_node(name), {names.LABEL_GPU_VENDOR: "nvidia"})


def test_a_share_that_must_match_a_template_goes_only_to_a_model_that_has_it() -> None:
    scheduler = make_scheduler(a100("a100"), t4("t4"), config=with_deviceshare_args(TEMPLATE_ARGS))
    scheduler.cache.templates.put(TEMPLATES_REF, A100_TEMPLATES)
    outcome = scheduler.schedule_one(make_pod("half", gpu_core=50, gpu_ratio=50))
    assert outcome.node == "a100"
    scheduler.cache.update_node(labelled(a100("a100"), {names.LABEL_GPU_MODEL: "H100"})[0])
    refused = scheduler.schedule_one(make_pod("half-2", gpu_core=50, gpu_ratio=50))
    assert refused.diagnosis.reasons_by_node() == {
        "a100": ["no matched GPU shared resource template"],
        "t4": ["no matched GPU shared resource template"],
    }


def test_a_share_matching_no_template_is_refused_at_prefilter() -> None:
    scheduler = make_scheduler(a100("a100"), config=with_deviceshare_args(TEMPLATE_ARGS))
    scheduler.cache.templates.put(TEMPLATES_REF, A100_TEMPLATES)
    refused = scheduler.schedule_one(make_pod("third", gpu_core=30, gpu_ratio=30))
    assert refused.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert refused.status.plugin == "DeviceShare"
    assert refused.status.message == "0/1 nodes are available: no matched GPU shared resource template."
    # The ConfigMap gains a template for it: the same pod fits (its shape changed with the templates).
    scheduler.cache.templates.put(
        TEMPLATES_REF, {"nvidia-A100-SXM4-80GB": {"third": {names.GPU_CORE: 30, names.GPU_MEMORY_RATIO: 30}}}
    )
    assert scheduler.schedule_one(make_pod("third", gpu_core=30, gpu_ratio=30)).node == "a100"


@pytest.mark.parametrize(
    "amounts",
    [{"nvidia_gpu": 1}, {"gpu_ratio": 30}],
    ids=["whole-gpu", "no-matched-resource"],
)
def test_pods_the_templates_do_not_concern_go_anywhere(amounts: dict[str, int]) -> None:
    # A whole GPU is not a share; a memory-only share asks for no matched resource (gpu-core).
    scheduler = make_scheduler(a100("a100"), config=with_deviceshare_args(TEMPLATE_ARGS))
    assert scheduler.schedule_one(make_pod("p", **amounts)).node == "a100"


def test_by_default_only_huawei_npu_shares_must_match_a_template() -> None:
    scheduler = make_scheduler(a100("a100"))  # Koordinator's default: matchedResources [huawei.com/npu-core]
    assert scheduler.schedule_one(make_pod("third", gpu_core=30, gpu_ratio=30)).node == "a100"
    assert scheduler.cache.templates.wanted() == {TEMPLATES_REF}


def test_the_templates_config_defaults_each_field_and_validates_at_startup() -> None:
    config = DeviceShareArgs.from_dict({"gpuSharedResourceTemplatesConfig": {"configMapName": "npu-templates"}})
    templates = config.shared_templates
    assert (templates.ref, templates.matched_resources) == ("koordinator-system/npu-templates", {"huawei.com/npu-core"})
    bad = {"configMapNamespace": "Not_A_Namespace", "configMapName": "", "matchedResources": "gpu-core", "other": 1}
    with pytest.raises(ConfigError) as info:
        DeviceShareArgs.from_dict({"gpuSharedResourceTemplatesConfig": bad})
    message = str(info.value)
    assert "gpuSharedResourceTemplatesConfig: unknown field other" in message
    assert "configMapNamespace: 'Not_A_Namespace' is not a namespace name" in message
    assert "configMapName: '' is not a ConfigMap name" in message
    assert "matchedResources: expected a list of resource names, got 'gpu-core'" in message
