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

from ...conftest import make_node, make_pod, make_scheduler

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
