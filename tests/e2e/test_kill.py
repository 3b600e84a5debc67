"""Killing any one component (SIGKILL, no chance to clean up) while pods are being scheduled:
`tessera up` restarts it, no object is lost, no device is handed out twice, and everything
converges — every pod bound and Running, every Node offering what its Device CR says.

One test per component, on one `tessera up`; each submits its own pods and kills its component
right after, while the scheduler is placing and binding them. And the DRA path end to end: a pod
with a claim for half a GPU's memory is allocated, prepared by its node's agent (the CDI spec
names exactly its GPU and its limits) and runs; kill -9 of that agent while the claim is prepared
loses nothing and prepares nothing twice; deleting the pod unprepares it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest
import urllib3

from apis.dra.gpus import DRIVER
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
REPO = Path(__file__).resolve().parents[2]
#: The DRA plugin's and the simulated kubelet's checkpoints in an agent's state directory.
CHECKPOINTS = ("dra-claims.json", "kubelet-dra-claims.json")
HALF = 40 * 1024**3  # of an a100-8x GPU's 80 GiB
HALF_GPU_POD = f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: half-gpu
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: {DRIVER}
            capacity:
              requests:
                memory: "{HALF}"
---
apiVersion: v1
kind: Pod
metadata:
  name: half
spec:
  resourceClaims:
    - name: gpu
      resourceClaimTemplateName: half-gpu
  containers:
    - name: main
      image: busybox
      resources:
        claims:
          - name: gpu
"""


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


def test_a_claim_for_half_a_gpu_runs_and_is_neither_lost_nor_prepared_twice_when_its_agent_is_killed(
    up: Up, cluster: Cluster
) -> None:
    namespace = unique("dra-kill")
    up.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "dra" / "deviceclasses.yaml"))
    cluster.create_namespace(namespace)
    up.kubectl("apply", "--server-side", "-n", namespace, "-f", "-", stdin=HALF_GPU_POD)

    def get(kind: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(up.kubectl("get", kind, name, "-n", namespace, "-o", "json"))
        return found

    pod = wait_for(
        lambda: (p := get("pod", "half"))["status"].get("phase") == "Running" and p,
        timeout_s=TIMEOUT_S,
        what="the pod with half a GPU running",
    )
    claim = get("resourceclaim", pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"])
    uid = claim["metadata"]["uid"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["consumedCapacity"]["memory"] == str(HALF)
    minor = int(result["device"].removeprefix("gpu-"))

    agent = f"agent/{pod['spec']['nodeName']}"
    directory = Path(up.state().components[agent].log).parent
    spec_file = directory / "dra" / "cdi" / f"{DRIVER}-claim_{uid}.json"
    spec = json.loads(spec_file.read_text())
    assert [n["path"] for d in spec["devices"] for n in d["containerEdits"]["deviceNodes"]] == [f"/dev/nvidia{minor}"]
    env = dict(e.split("=", 1) for e in spec["containerEdits"]["env"])
    assert env["NVIDIA_VISIBLE_DEVICES"] == str(minor) and env["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(HALF)

    def log() -> str:
        return Path(up.state().components[agent].log).read_text(errors="replace")

    def prepared() -> int:
        """The plugin's preparations of the claim (not its answers from its checkpoint)."""
        return sum(1 for line in log().splitlines() if '"Prepared ResourceClaim" ' in line and uid in line)

    def held() -> tuple[bool, bool]:
        """Whether the plugin's and the simulated kubelet's checkpoints have the claim."""
        state = directory / "state"
        plugin, kubelet = (json.loads((state / name).read_text())["claims"] for name in CHECKPOINTS)
        return uid in plugin, uid in kubelet

    assert prepared() == 1 and held() == (True, True)
    killed = up.state().components[agent].pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    up.wait_restarted(agent, killed)
    wait_for(
        lambda: f'"Restored the simulated kubelet\'s DRA claims" claims="{uid}"' in log(),
        timeout_s=TIMEOUT_S,
        what="the restarted agent restoring the claim",
    )
    assert f'"Restored prepared ResourceClaims" claims="{uid}"' in log()  # held again in the ledger
    assert held() == (True, True) and spec_file.exists()
    assert get("pod", "half")["status"]["phase"] == "Running"

    up.kubectl("delete", "pod", "half", "-n", namespace)
    wait_for(lambda: held() == (False, False), timeout_s=TIMEOUT_S, what="the claim unprepared")
    assert not spec_file.exists()
    assert prepared() == 1  # prepared once, through the kill
    cluster.delete_namespace(namespace)
