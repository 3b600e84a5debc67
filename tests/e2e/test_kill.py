"""Killing any one component (SIGKILL, no chance to clean up) while pods are being scheduled:
`tessera up` restarts it, no object is lost, no device is handed out twice, and everything
converges — every pod bound and Running, every Node offering what its Device CR says.

One test per component, on one `tessera up`; each submits its own pods and kills its component
right after, while the scheduler is placing and binding them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TypeVar

import kubernetes
import pytest
import urllib3

from apis.extension import names
from apis.k8s.core import Pod
from tests.e2e.checks import allocatable_problems, allocation_problems
from tests.e2e.workloads import manifests
from tests.support.cluster import unique
from tests.support.up import Cluster, Up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 180.0
WORKLOAD = (
    *((f"whole-{i}", {names.NVIDIA_GPU: "1"}, {}) for i in range(2)),
    *((f"half-{i}", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, {}) for i in range(4)),
    *((f"quarter-{i}", {names.GPU_CORE: "25", names.GPU_MEMORY: "20Gi"}, {}) for i in range(2)),
    *((f"cpu-{i}", {names.CPU: "100m"}, {}) for i in range(2)),
)
T = TypeVar("T")


def answered(read: Callable[[], T]) -> Callable[[], T | None]:
    """`read`, with "the API server does not answer (yet)" as None: while it restarts."""

    def attempt() -> T | None:
        try:
            return read()
        except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError):
            return None

    return attempt


@pytest.mark.parametrize(
    "component", ["apiserver", "scheduler", "controller", "descheduler", "kube-controller-manager", "agent/sim-1"]
)
def test_a_killed_component_is_restarted_and_nothing_is_lost_or_double_allocated(
    up: Up, cluster: Cluster, component: str
) -> None:
    wait_for(
        answered(lambda: not allocatable_problems(cluster.nodes(), cluster.devices())),
        timeout_s=TIMEOUT_S,
        what="allocatable to match the Device CRs",
    )
    before = cluster.uids()
    namespace = unique("kill")
    cluster.create_namespace(namespace)
    cluster.create_pods(namespace, manifests(WORKLOAD))
    killed = up.state().components[component].pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)  # while the scheduler places and binds the new pods

    up.wait_restarted(component, killed)
    assert f"! {component} was killed (SIGKILL)" in up.output()

    def all_running() -> list[Pod] | None:
        pods = cluster.pods(namespace)
        return pods if len(pods) == len(WORKLOAD) and all(p.phase == "Running" for p in pods) else None

    wait_for(answered(all_running), timeout_s=TIMEOUT_S, what=f"every pod Running after {component} was killed")
    wait_for(
        answered(lambda: not allocatable_problems(cluster.nodes(), cluster.devices())),
        timeout_s=TIMEOUT_S,
        what="allocatable to match the Device CRs again",
    )
    after = cluster.uids()
    assert {key: uid for key, uid in before.items() if after.get(key) != uid} == {}, "objects lost or replaced"
    assert allocation_problems(cluster.pods(), cluster.devices()) == []
    # Give the room back: each kill adds a namespace of GPU pods, and the demo cluster is small.
    cluster.delete_namespace(namespace)
