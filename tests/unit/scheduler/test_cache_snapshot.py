"""CacheSnapshot: a restored copy holds what the cache holds — bound pods, pods in flight and
their reserved devices — and changes to either side never reach the other."""

from __future__ import annotations

from apis.crds.device import DeviceType
from scheduler.cache import CacheSnapshot, ClusterCache, PodInfo
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_cache


def state(cache: ClusterCache) -> dict[str, object]:
    return {
        info.name: (
            dict(info.requested),
            {ident: cache.is_assumed(ident) for ident in info.pods},
            {h.ident: [a.minor for a in h.allocations.get(DeviceType.GPU, ())] for h in info.devices.holdings.values()},
        )
        for info in cache.nodes()
    }


def test_a_restored_snapshot_is_an_independent_equal_cache() -> None:
    cache = make_cache(make_node("node-a", gpus=4), make_node("node-b", gpus=2))
    cache.add_pod(bound_pod("running", "node-a", gpu_alloc(0, 50), gpu_core=50, gpu_ratio=50))
    flying = PodInfo.of(make_pod("flying", gpu_core=100, gpu_ratio=100))
    cache.assume(flying, "node-b")
    cache.reserve_devices(flying, "node-b", {DeviceType.GPU: (gpu_alloc(1),)})
    before = state(cache)

    copy = CacheSnapshot.of(cache).restore()
    assert state(copy) == before
    assert copy.is_assumed(flying.ident) and not copy.is_assumed("uid-default-running")

    copy.remove_pod(bound_pod("running", "node-a"))
    copy.forget(flying.ident)
    assert state(cache) == before
    cache.add_pod(bound_pod("late", "node-b", gpu_alloc(0), gpu_core=100, gpu_ratio=100))
    assert "uid-default-late" not in copy.node("node-b").pods  # type: ignore[union-attr]  # node-b exists


def test_the_gpu_shared_resource_templates_are_copied_and_stay_apart() -> None:
    cache = make_cache(make_node("node-a", gpus=1))
    half = {"koordinator.sh/gpu-core": 50}
    cache.templates.put("ns/templates", {"nvidia-A100-SXM4-80GB": {"half": half}})
    copy = CacheSnapshot.of(cache).restore()
    assert copy.templates.get("ns/templates") == {"nvidia-A100-SXM4-80GB": {"half": half}}
    cache.templates.clear("ns/templates")
    assert copy.templates.get("ns/templates") == {"nvidia-A100-SXM4-80GB": {"half": half}}
    assert cache.templates.get("ns/templates") == {}
