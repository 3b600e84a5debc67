"""Issue 31 live: `tessera up --demo`'s quota tree (`cli.localcluster.quotademo`: gpu-teams over
team-a and team-b, team B borrowing) on two 8-GPU nodes, with the real API server, scheduler and
controller processes.

1. Koordinator's fine-grained device manual's pod — outside every quota, asking
   `koordinator.sh/gpu: "100"`, one GPU in percent — lowers the root quota's total by exactly
   that GPU, moves no team's runtime and leaves no team over its runtime, so reclaim has nothing
   to evict (it once set every runtime to 0 and evicted every team pod).
2. A pod bound outside the scheduler that takes nearly the whole cluster collapses the root's
   total: reclaim's circuit breaker holds back the mass eviction (condition, Event, metric,
   `tessera quota`'s note) past the grace period, until an operator resumes it with
   `tessera quota --resume-reclaim`; then reclaim takes back no more than the runtimes say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import SchedulerProcess
from cli.localcluster import demo, quotademo
from kube import Client
from kube.resources import EVENTS, PODS
from tests.support.cluster import PodWatch, create_gpu_nodes, create_pod
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

GRACE = 2.0
GPU = names.GPU_CORE
SCHEDULER_CONFIG = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]}}\n"
)
#: The demo's quotas and their namespaces.
QUOTAS = {quotademo.PARENT: demo.NAMESPACE, quotademo.TEAM_A: quotademo.TEAM_A, quotademo.TEAM_B: quotademo.TEAM_B}


def runtimes(client: Client) -> dict[str, dict[str, str]]:
    """Each demo quota's runtime annotation, as the controller wrote it."""
    out = {}
    for name, namespace in QUOTAS.items():
        obj = client.resource(names.ELASTIC_QUOTAS).get(name, namespace=namespace)
        out[name] = json.loads((obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_QUOTA_RUNTIME, "{}"))
    return out


def team_b(client: Client) -> dict[str, Any]:
    return client.resource(names.ELASTIC_QUOTAS).get(quotademo.TEAM_B, namespace=quotademo.TEAM_B)


def condition(quota: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (quota.get("status") or {}).get("conditions", []) if c["type"] == kind), None)


def root_total(controller: ControllerProcess) -> float:
    return controller.metric("tessera_controller_quota_root_total", resource=GPU)


def evictions(controller: ControllerProcess) -> float:
    return controller.metric("tessera_controller_quota_reclaim_evictions_total")


def tessera_quota(apiserver: EmbeddedAPIServer, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cli", "quota", "--kubeconfig", str(apiserver.kubeconfig), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


@pytest.fixture(scope="module")
def teams(
    apiserver: EmbeddedAPIServer,
    client: Client,
    start_controller: Callable[..., ControllerProcess],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ControllerProcess, PodWatch]]:
    """The demo's quotas and team B's 5 pods placed, the controller's figures written."""
    work_dir = Path(tmp_path_factory.mktemp("qb", numbered=True))
    create_gpu_nodes(client, "qb-n1", "qb-n2")
    config = work_dir / "config.yaml"
    config.write_text(SCHEDULER_CONFIG)
    with SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=["--config", str(config)]):
        controller = start_controller(
            "--quota-reclaim-grace", str(GRACE), "--quota-eviction-burst", "10", "--quota-breaker-stable", "3600"
        )
        assert quotademo.submit(client) == quotademo.BORROWERS
        watch = PodWatch(client, quotademo.TEAM_B)
        assert quotademo.wait_written(client, 90) == {}
        wait_for(lambda: runtimes(client)[quotademo.TEAM_B] == {GPU: "500"}, what="team-b's runtime written")
        yield controller, watch
        watch.stop()


def test_a_koordinator_gpu_pod_outside_every_quota_moves_no_team_runtime(
    client: Client, teams: tuple[ControllerProcess, PodWatch]
) -> None:
    controller, watch = teams
    wait_for(lambda: root_total(controller) == 1600, what="the root's total: 16 GPUs, nothing outside the tree")
    before = runtimes(client)
    assert before == {quotademo.PARENT: {GPU: "500"}, quotademo.TEAM_A: {GPU: "0"}, quotademo.TEAM_B: {GPU: "500"}}
    # Koordinator's manual's pod, in a namespace no quota claims (the default quota).
    create_pod(client, "default", "pod-example", {names.KOORD_GPU: "100"})
    wait_for(
        lambda: client.resource(PODS).get("pod-example", namespace="default")["spec"].get("nodeName"),
        what="the koordinator.sh/gpu pod bound",
    )
    # It holds one GPU: the root's total falls by exactly that, never more.
    wait_for(lambda: root_total(controller) == 1500, what="the root's total less the one GPU the pod holds")
    assert runtimes(client) == before  # 15 GPUs still hold gpu-teams' max of 6: no team loses any
    quota = team_b(client)
    assert quota["status"]["used"][GPU] == "500"  # used <= runtime: nothing for reclaim to take
    assert controller.metric("tessera_controller_quota_excess", resource=GPU) == 0
    assert len([p for p in watch.pods() if p.node_name]) == quotademo.BORROWERS
    assert evictions(controller) == 0 and condition(quota, "ReclaimPaused") is None
    client.resource(PODS).delete("pod-example", namespace="default")
    wait_for(lambda: root_total(controller) == 1600, what="the root's total back")


def test_the_breaker_holds_back_a_mass_eviction_until_an_operator_resumes_it(
    apiserver: EmbeddedAPIServer, client: Client, teams: tuple[ControllerProcess, PodWatch]
) -> None:
    controller, watch = teams
    wait_for(lambda: root_total(controller) == 1600, what="the root's total: 16 GPUs")
    # A pod bound outside the scheduler (another scheduler's, or nodeName set by hand) holding
    # 14 GPUs outside every quota: the teams' runtimes fall to 2 GPUs; team B uses 5.
    create_pod(client, "default", "bypass", {names.NVIDIA_GPU: "14"}, node_name="qb-n1")
    wait_for(lambda: controller.metric("tessera_controller_quota_reclaim_paused") == 1, what="reclaim paused")
    assert controller.metric("tessera_controller_quota_reclaim_pauses_total", reason="RootTotalCollapsed") == 1
    wait_for(lambda: condition(team_b(client), "ReclaimPaused") is not None, what="team-b's ReclaimPaused condition")
    paused = condition(team_b(client), "ReclaimPaused")
    assert paused is not None and (paused["status"], paused["reason"]) == ("True", "RootTotalCollapsed")
    assert "fell from 1600 to 200 in one step" in paused["message"]
    events = client.resource(EVENTS).list(namespace=quotademo.TEAM_B).items
    assert any(e["reason"] == "QuotaReclaimPaused" and e["type"] == "Warning" for e in events)
    # Held back past the grace period: team-b, over its runtime, is looked at again every 5 s
    # and keeps all its pods.
    reconciled = controller.metric("tessera_controller_reconcile_total", controller="elasticquota")
    wait_for(
        lambda: controller.metric("tessera_controller_reconcile_total", controller="elasticquota") >= reconciled + 4,
        timeout_s=60,
        what="team-b looked at again while paused, past its grace period",
    )
    assert evictions(controller) == 0 and len(watch.pods()) == quotademo.BORROWERS
    shown = tessera_quota(apiserver)
    assert "note: quota reclaim is PAUSED since" in shown.stdout and "(RootTotalCollapsed)" in shown.stdout
    # The operator accepts the figures: reclaim resumes, and after a whole grace period takes
    # team B back to its runtime (2 GPUs of gpu-teams, team A idle), no further.
    resumed = tessera_quota(apiserver, "--resume-reclaim")
    assert resumed.returncode == 0 and "the controller resumes quota reclaim" in resumed.stdout, resumed.stderr
    wait_for(lambda: controller.metric("tessera_controller_quota_reclaim_paused") == 0, what="reclaim resumed")
    watch.wait_for(lambda pods: len(pods) == 2, "team-b down to its runtime of 2 GPUs", timeout=60)
    assert evictions(controller) == 3
    wait_for(lambda: (condition(team_b(client), "ReclaimPaused") or {}).get("status") == "False", what="cleared")
    assert tessera_quota(apiserver, "--resume-reclaim").stdout.startswith("quota reclaim is not paused")
    client.resource(PODS).delete("bypass", namespace="default")
