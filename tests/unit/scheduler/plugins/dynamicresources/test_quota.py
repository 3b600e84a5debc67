"""ElasticQuota charges what a pod's ResourceClaims allocate (apis.dra.quota), through the whole
cycle: admitted at Reserve with the claims' charge, refused with the quota's numbers when they do
not fit, the charge recorded on the pod, and a gang of claim pods all or nothing."""

from __future__ import annotations

import dataclasses

from apis.dra import RESOURCE_SLICES
from apis.dra import quota as claims_quota
from apis.dra.claim import DeviceClass
from apis.dra.slice import ResourceSlice
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Scheduler, with_elastic_quota
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.status import Code
from tests.support.builders import make_node, quota_cr

from ..coscheduling.gangs import FOREVER, nodes_of, schedule_all
from .dra import GIB, GPU_CLASS, add_claims, claim, claim_pod, scheduler_with, store_of

NS = "team-a"


def _scheduler(gpu_core_max: int, *, gpus: int = 4) -> Scheduler:
    fpga = DeviceClass.from_dict(
        {
            "metadata": {"name": "fpga"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "fpga.example.com"'}}]},
        }
    )
    scheduler = scheduler_with(
        make_node("n1", gpus=gpus, gpu_memory=80 * GIB),
        config=with_elastic_quota(SchedulerConfig()),
        classes=(GPU_CLASS, fpga),
    )
    scheduler.quotas.set_quotas(
        [quota_cr(NS, namespace=NS, min={names.GPU_CORE: gpu_core_max}, max={names.GPU_CORE: gpu_core_max})]
    )
    return scheduler


def test_whole_gpus_and_shares_of_claims_are_charged_and_over_quota_waits_with_the_quotas_reason() -> None:
    # All of a GPU's compute (`cores: 100`; our GPUs' default is none) and, by default, its memory.
    scheduler = _scheduler(250)
    add_claims(
        scheduler,
        claim("whole-0", namespace=NS, cores=100),
        claim("whole-1", namespace=NS, cores=100),
        claim("share", namespace=NS, cores=40, memory=8 * GIB),
        claim("whole-2", namespace=NS, cores=100),
    )
    for name in ("whole-0", "whole-1"):
        out = scheduler.schedule_one(claim_pod(f"p-{name}", name, namespace=NS))
        assert out.scheduled, out.status.message
    used = scheduler.quotas.used(NS)
    assert used[names.GPU_CORE] == 200
    assert used[names.GPU_MEMORY_RATIO] == 200
    assert used[names.GPU_MEMORY] == 160 * GIB
    # The charge is recorded on the pod, for the controller's account too.
    assert claims_quota.decode(out.annotations) == {
        names.GPU_CORE: 100,
        names.GPU_MEMORY: 80 * GIB,
        names.GPU_MEMORY_RATIO: 100,
    }
    # A share of 40 cores fits the 50 left; its 8 GiB of 80 count 10 %.
    out = scheduler.schedule_one(claim_pod("p-share", "share", namespace=NS))
    assert out.scheduled, out.status.message
    assert scheduler.quotas.used(NS)[names.GPU_CORE] == 240
    assert scheduler.quotas.used(NS)[names.GPU_MEMORY_RATIO] == 210
    # A third whole GPU does not fit the quota: the pod waits with the quota's reason; its claim
    # is given back, the quota's used is what it was.
    out = scheduler.schedule_one(claim_pod("p-whole-2", "whole-2", namespace=NS))
    assert out.status.code is Code.UNSCHEDULABLE
    assert "Insufficient quotas, quotaName: team-a" in out.status.message
    assert "exceedDimensions: [koordinator.sh/gpu-core]" in out.status.message
    left = store_of(scheduler).claim(f"{NS}/whole-2")
    assert left is not None and left.allocation is None
    assert scheduler.quotas.used(NS)[names.GPU_CORE] == 240


def test_devices_of_other_drivers_are_charged_per_device_of_their_class() -> None:
    scheduler = _scheduler(1000)
    published = ResourceSlice.from_dict(
        {
            "metadata": {"name": "n1-fpga"},
            "spec": {
                "driver": "fpga.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
                "devices": [{"name": "fpga-0"}, {"name": "fpga-1"}],
            },
        }
    )
    scheduler.feeds.deliver(RESOURCE_SLICES, published)
    add_claims(scheduler, claim("two-fpgas", namespace=NS, klass="fpga", count=2))
    out = scheduler.schedule_one(claim_pod("p", "two-fpgas", namespace=NS))
    assert out.scheduled, out.status.message
    assert scheduler.quotas.used(NS)["fpga" + claims_quota.DEVICES_SUFFIX] == 2
    assert names.GPU_CORE not in scheduler.quotas.used(NS)


def test_a_bound_pods_recorded_charge_counts_as_the_scheduler_charged_it() -> None:
    scheduler = _scheduler(250)
    add_claims(scheduler, claim("whole-0", namespace=NS, cores=100))
    out = scheduler.schedule_one(claim_pod("p", "whole-0", namespace=NS))
    assert out.scheduled
    # A fresh account (the controller's, or a restart) reads the record on the bound pod.
    pod = claim_pod("p", "whole-0", namespace=NS)
    bound = dataclasses.replace(pod, node_name="n1", meta=dataclasses.replace(pod.meta, annotations=out.annotations))
    fresh = _scheduler(250)
    fresh.quotas.update_pod(bound)
    assert fresh.quotas.used(NS) == scheduler.quotas.used(NS)


def test_a_gang_of_claim_pods_over_quota_is_placed_not_at_all() -> None:
    def member(name: str) -> Pod:
        gang = {names.ANNOTATION_GANG_NAME: "train", names.ANNOTATION_GANG_MIN_AVAILABLE: "2"}
        return claim_pod(name, f"{name}-gpu", namespace=NS, annotations=gang)

    # Two whole GPUs on the node, a quota of one and a half: the first member's claim fits the
    # quota, the second's does not — neither is placed, and both claims are given back.
    scheduler = _scheduler(150)
    add_claims(scheduler, claim("w0-gpu", namespace=NS, cores=100), claim("w1-gpu", namespace=NS, cores=100))
    out = schedule_all(scheduler, [member("w0"), member("w1")], now=FOREVER)
    assert nodes_of(out) == {f"{NS}/w0": None, f"{NS}/w1": None}
    for key in (f"{NS}/w0-gpu", f"{NS}/w1-gpu"):
        found = store_of(scheduler).claim(key)
        assert found is not None and found.allocation is None
    assert not scheduler.quotas.used(NS)
    # A quota for both: the gang is placed whole.
    scheduler = _scheduler(200)
    add_claims(scheduler, claim("w0-gpu", namespace=NS, cores=100), claim("w1-gpu", namespace=NS, cores=100))
    out = schedule_all(scheduler, [member("w0"), member("w1")])
    assert nodes_of(out) == {f"{NS}/w0": "n1", f"{NS}/w1": "n1"}
    assert scheduler.quotas.used(NS)[names.GPU_CORE] == 200
