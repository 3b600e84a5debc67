"""Elastic quota live: API server, scheduler and controller processes, quotas as CRs, pods through
the API.

Two teams share one 8-GPU node, each guaranteed 4 GPUs (min) and allowed all 8 (max). Team B
borrows team A's idle GPUs; when A's pods arrive, B's runtime falls back to its min, and once B
has stayed above it for the grace period, the controller evicts B's newest preemptible pods —
just enough — and A's pods bind. The controller writes each quota's `status.used` and runtime
annotations once per change; killed and restarted with the scheduler, both rebuild `used` from
the API alone, write nothing new, and the scheduler refuses B beyond its runtime. `tessera quota`
shows what the controller wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.extension import names
from apis.k8s.meta import now_rfc3339
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import SchedulerProcess
from kube import Client
from kube.resources import EVENTS, PODS
from tests.integration.controller.nodes import idle
from tests.support.cluster import PodWatch, condition, create_gpu_nodes, create_namespace, create_pod
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

GRACE = 3.0
ONE_GPU = {names.NVIDIA_GPU: "1"}
KEEP = {names.LABEL_QUOTA_PREEMPTIBLE: "false"}
SCHEDULER_CONFIG = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]}}\n"
)


def create_quota(client: Client, namespace: str) -> None:
    client.resource(names.ELASTIC_QUOTAS).create(
        {
            "apiVersion": names.ELASTIC_QUOTAS.api_version,
            "kind": names.ELASTIC_QUOTAS.kind,
            "metadata": {"name": namespace, "namespace": namespace},
            "spec": {"min": {names.GPU_CORE: "400"}, "max": {names.GPU_CORE: "800"}},
        },
        namespace=namespace,
    )


def quota(client: Client, namespace: str) -> dict[str, Any]:
    return client.resource(names.ELASTIC_QUOTAS).get(namespace, namespace=namespace)


def figures(client: Client, namespace: str) -> tuple[str, str]:
    """(status.used, runtime annotation) of GPU cores, as the controller wrote them."""
    obj = quota(client, namespace)
    runtime = json.loads(obj["metadata"].get("annotations", {}).get(names.ANNOTATION_QUOTA_RUNTIME) or "{}")
    used = (obj.get("status") or {}).get("used") or {}
    return used.get(names.GPU_CORE, ""), runtime.get(names.GPU_CORE, "")


def quota_writes(process: ControllerProcess) -> float:
    return process.metric("tessera_controller_quota_writes_total")


def settled(process: ControllerProcess) -> float:
    """The controller's quota write count once it has processed everything and written no more
    for a second (a write storm never settles).

    The second is a window in which its own writes' watch events come back and, were it to
    answer them with more writes, show as a changed count: nothing the controller exposes says
    that no such event is still on its way, so this waits it out rather than on a condition."""
    last = -1.0
    while True:
        wait_for(lambda: idle(process), what="the controller to be idle")
        count = quota_writes(process)
        if count == last:
            return count
        last = count
        time.sleep(1.0)


@pytest.fixture
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("q", numbered=True))


@pytest.fixture
def teams(client: Client) -> Iterator[tuple[str, str, PodWatch, PodWatch]]:
    team_a, team_b = create_namespace(client, "team-a"), create_namespace(client, "team-b")
    create_quota(client, team_a)
    create_quota(client, team_b)
    watch_a, watch_b = PodWatch(client, team_a), PodWatch(client, team_b)
    yield team_a, team_b, watch_a, watch_b
    watch_a.stop()
    watch_b.stop()


def test_borrow_then_reclaim_and_restart_keeps_used_exact(
    apiserver: EmbeddedAPIServer,
    client: Client,
    start_controller: Callable[..., ControllerProcess],
    teams: tuple[str, str, PodWatch, PodWatch],
    work_dir: Path,
) -> None:
    team_a, team_b, watch_a, watch_b = teams
    create_gpu_nodes(client, "quota-reclaim-n1")
    config = work_dir / "config.yaml"
    config.write_text(SCHEDULER_CONFIG)
    scheduler_args = ["--config", str(config)]
    controller_args = ("--quota-reclaim-grace", str(GRACE))
    with SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=scheduler_args):
        controller = start_controller(*controller_args)
        # Team A idle: team B borrows 3 GPUs beyond its min (one of its 7 pods non-preemptible).
        create_pod(client, team_b, "b0", ONE_GPU, labels=KEEP)
        for i in range(1, 4):
            create_pod(client, team_b, f"b{i}", ONE_GPU)
        # creationTimestamp has whole seconds: b4-b6 are the newest once they are a second later.
        b3 = client.resource(PODS).get("b3", namespace=team_b)["metadata"]["creationTimestamp"]
        wait_for(lambda: now_rfc3339() > b3, what="the second after b3's creation")
        for i in range(4, 7):
            create_pod(client, team_b, f"b{i}", ONE_GPU)
        watch_b.wait_bound(7)
        wait_for(lambda: figures(client, team_b) == ("700", "700"), what="team-b's used and runtime written")
        before = settled(controller)
        assert quota(client, team_b)["status"]["conditions"][0]["status"] == "True"

        # Team A asks for its min: 1 GPU is free, 3 of B's borrowed GPUs must come back.
        asked = time.monotonic()
        for i in range(4):
            create_pod(client, team_a, f"a{i}", ONE_GPU)
        watch_a.wait_bound(4, timeout=GRACE + 60)
        waited = time.monotonic() - asked
        print(f"team-a's pods bound {waited:.1f}s after they were created (grace {GRACE:g}s)")
        assert waited >= GRACE  # nothing was evicted before the grace period ran out
        left = watch_b.wait_for(lambda pods: len(pods) == 4, "team-b back to 4 pods")
        assert [p.name for p in left] == ["b0", "b1", "b2", "b3"]  # the newest went; b0 never
        assert controller.metric("tessera_controller_quota_reclaim_evictions_total", quota=team_b) == 3
        wait_for(lambda: figures(client, team_b) == ("400", "400"), what="team-b's used back at its runtime")
        wait_for(lambda: figures(client, team_a) == ("400", "400"), what="team-a's used written")
        events = client.resource(EVENTS).list(namespace=team_b).items
        reclaimed = [e for e in events if e.get("reason") == "QuotaReclaimed"]
        assert len(reclaimed) == 3 and all(e["involvedObject"]["name"] == team_b for e in reclaimed)
        assert "above its runtime {koordinator.sh/gpu-core: 400}" in reclaimed[0]["message"]
        assert any(e.get("reason") == "ReclaimedByQuota" and e["involvedObject"]["name"] == "b6" for e in events)
        # At most one annotation and one status write per quota per change (4 pods created, 4
        # bound, 3 evicted), and none once nothing changes (`settled`).
        writes = settled(controller) - before
        print(f"quota writes while team-a arrived and team-b was reclaimed: {writes:g}")
        assert writes <= 2 * 2 * 11
        controller.terminate()

    # Both restarted: used rebuilt from the API alone; nothing is rewritten; B stays refused.
    with SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=scheduler_args):
        controller = start_controller(*controller_args)
        assert settled(controller) == 0
        assert figures(client, team_b) == ("400", "400")
        create_pod(client, team_b, "b7", ONE_GPU)
        watch_b.wait_for(
            lambda pods: any(
                p.name == "b7" and "Insufficient quotas, quotaName: team-b" in (condition(p) or ("", "", ""))[2]
                for p in pods
            ),
            "b7 refused by team-b's quota",
        )
        assert len(watch_b.pods()) == 5  # and the controller evicted nothing more
        shown = tessera_quota(apiserver, "-o", "json")
        assert shown.returncode == 0, shown.stderr
        by_name = {q["name"]: q for q in json.loads(shown.stdout)["quotas"]}
        assert by_name[team_b]["runtime"][names.GPU_CORE] == "400"
        assert by_name[team_b]["used"][names.GPU_CORE] == "400"
        assert by_name[team_b]["request"][names.GPU_CORE] == "500"  # b7 pending asks too
        table = tessera_quota(apiserver, "-n", team_a).stdout.splitlines()
        assert table[1].split()[:8] == [team_a, team_a, names.GPU_CORE, "400", "800", "400", "400", "400"]
        refused = tessera_quota(apiserver, "-n", "no-such-namespace")
        assert refused.returncode == 2
        assert "tessera quota: namespace 'no-such-namespace' not found" in refused.stderr
        controller.terminate()


def tessera_quota(apiserver: EmbeddedAPIServer, *args: str) -> subprocess.CompletedProcess[str]:
    """`tessera quota` from the real command line."""
    command = [sys.executable, "-m", "cli", "quota", "--kubeconfig", str(apiserver.kubeconfig), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


def test_invalid_and_malformed_quotas_get_a_condition_and_an_event(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    namespace = create_namespace(client, "broken")
    api = client.resource(names.ELASTIC_QUOTAS)
    orphan = {
        "apiVersion": names.ELASTIC_QUOTAS.api_version,
        "kind": names.ELASTIC_QUOTAS.kind,
        "metadata": {"name": "orphan", "namespace": namespace, "labels": {names.LABEL_QUOTA_PARENT: "nowhere"}},
        "spec": {"max": {names.GPU_CORE: "100"}},
    }
    api.create(orphan, namespace=namespace)
    upside_down = {**orphan, "metadata": {"name": "upside-down", "namespace": namespace}}
    upside_down["spec"] = {"min": {names.GPU_CORE: "400"}, "max": {names.GPU_CORE: "100"}}
    api.create(upside_down, namespace=namespace)  # no webhook here: the API server takes it
    controller = start_controller()

    def valid(name: str) -> dict[str, Any] | None:
        conditions = (api.get(name, namespace=namespace).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Valid"), None)

    found = wait_for(lambda: valid("orphan"), what="orphan's Valid condition")
    assert (found["status"], found["reason"]) == ("False", "InvalidQuota")
    assert "parent quota nowhere does not exist" in found["message"]
    found = wait_for(lambda: valid("upside-down"), what="upside-down's Valid condition")
    assert (found["status"], found["reason"]) == ("False", "MalformedQuota")
    assert "min 400 exceeds max 100" in found["message"]

    def warnings() -> list[tuple[str, int]]:
        events = client.resource(EVENTS).list(namespace=namespace).items
        found = [e for e in events if e.get("reason") == "InvalidElasticQuota"]
        return sorted((e["involvedObject"]["name"], e.get("count", 1)) for e in found)

    wait_for(lambda: [n for n, _ in warnings()] == ["orphan", "upside-down"], what="a Warning Event about each quota")
    settled(controller)
    assert warnings() == [("orphan", 1), ("upside-down", 1)]  # once each, however often they are reconciled
    assert controller.get("/healthz")[0] == 200
