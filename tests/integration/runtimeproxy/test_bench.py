"""The benchmarks stay runnable (they are run by hand; no timing is asserted here)."""

from __future__ import annotations

import pytest
from cri_api.v1 import api_pb2 as cri

from cli.bench import hooks as bench_hooks
from cli.bench import runtime_proxy as bench_runtime_proxy
from tests.support import containerd

pytestmark = [pytest.mark.integration]


def test_hook_bench_runs() -> None:
    result = bench_hooks.measure(iterations=5, warmup=1)
    assert result.count == 5
    assert 0 < result.p50_ms <= result.p99_ms <= result.max_ms


@pytest.mark.root
def test_runtime_proxy_bench_runs(ctrd: containerd.Containerd) -> None:
    direct, proxied = bench_runtime_proxy.measure(
        ctrd.address, ctrd.image, iterations=3, warmup=1, cgroup_parent=ctrd.cgroup_parent
    )
    assert direct.count == proxied.count == 3
    with containerd.CRIClient(ctrd.address) as client:
        assert not client.runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=30).items
