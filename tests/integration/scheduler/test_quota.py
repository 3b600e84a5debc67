"""ElasticQuota live: API server and scheduler processes, quotas as CRs, pods through the API.

Two teams share one 8-GPU node, each guaranteed 4 GPUs (min) and allowed 8 (max). Team A
borrows team B's idle GPUs; once team B asks, A's runtime falls back and A's next pod is refused
with the quota's numbers. Killed and restarted, the scheduler rebuilds `used` from the API alone
and admits exactly as many of A's pods as its runtime allows once room is freed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, resources
from tests.support import apiservers
from tests.support.cluster import PodWatch, condition, create_gpu_nodes, create_namespace, create_pod, wait_for_event

pytestmark = pytest.mark.integration

CONFIG = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]}}\n"
)
ONE_GPU = {names.NVIDIA_GPU: "1"}


apiserver = apiservers.apiserver_fixture("function")


def create_quota(client: Client, namespace: str, labels: dict[str, str] | None = None) -> None:
    client.resource(names.ELASTIC_QUOTAS).create(
        {
            "apiVersion": names.ELASTIC_QUOTAS.api_version,
            "kind": names.ELASTIC_QUOTAS.kind,
            "metadata": {"name": namespace, "namespace": namespace, "labels": labels or {}},
            "spec": {"min": {names.GPU_CORE: "400"}, "max": {names.GPU_CORE: "800"}},
        },
        namespace=namespace,
    )


def explain(scheduler: SchedulerProcess, namespace: str, name: str) -> str:
    """`tessera explain`'s text for a pod, from the real command line."""
    result = subprocess.run(
        [sys.executable, "-m", "cli", "explain", name, "-n", namespace, "--scheduler", scheduler.grpc_address],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def refused_by_quota(watch: PodWatch, name: str) -> bool:
    found = [p for p in watch.pods() if p.name == name]
    state = condition(found[0]) if found else None
    return state is not None and state[1] == "Unschedulable" and "Insufficient quotas, quotaName: " in state[2]


def test_borrow_then_refuse_and_restart_keeps_used_exact(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "quota-n1")
    team_a, team_b = create_namespace(client, "team-a"), create_namespace(client, "team-b")
    create_quota(client, team_a)
    create_quota(client, team_b)
    config = work_dir / "config.yaml"
    config.write_text(CONFIG)
    args = ["--config", str(config)]
    watch_a, watch_b = PodWatch(client, team_a), PodWatch(client, team_b)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=args) as scheduler:
            for i in range(6):  # B idle: A borrows 2 GPUs beyond its min of 4
                create_pod(client, team_a, f"a{i}", ONE_GPU)
            watch_a.wait_bound(6)
            for i in range(2):
                create_pod(client, team_b, f"b{i}", ONE_GPU)
            watch_b.wait_bound(2)
            # A: min 4 + what B leaves idle of the node's 8 (8 - 4 - 2) = 6 GPUs, all used.
            create_pod(client, team_a, "a6", ONE_GPU)
            watch_a.wait_for(lambda _: refused_by_quota(watch_a, "a6"), "a6 refused by its quota")
            message = condition(watch_a.pod("a6"))[2]  # type: ignore[index]
            assert "quotaName: team-a, runtime: {koordinator.sh/gpu-core: 600}, " in message
            assert "used: {koordinator.sh/gpu-core: 600}" in message
            explained = explain(scheduler, team_a, "a6")
            assert "ElasticQuota: Insufficient quotas, quotaName: team-a, runtime: " in explained
            assert "exceedDimensions: [koordinator.sh/gpu-core], max: {koordinator.sh/gpu-core: 800}" in explained
        # A new process knows used from the API alone: a7 is refused too, and once a0 leaves,
        # exactly one of a6/a7 fits.
        with SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=args):
            create_pod(client, team_a, "a7", ONE_GPU)
            watch_a.wait_for(lambda _: refused_by_quota(watch_a, "a7"), "a7 refused by its quota")
            assert not watch_a.pod("a6").node_name
            client.resource(resources.PODS).delete("a0", namespace=team_a)
            pods = watch_a.wait_for(
                lambda pods: any(p.name in ("a6", "a7") and p.node_name for p in pods), "a6 or a7 bound"
            )
            assert sum(1 for p in pods if p.node_name) == 6
    finally:
        watch_a.stop()
        watch_b.stop()


def test_invalid_quota_gets_an_event_and_refuses_its_pods(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "quota-n2")
    orphan = {names.LABEL_QUOTA_PARENT: "no-such-parent"}
    early, late = create_namespace(client, "early"), create_namespace(client, "late")
    create_quota(client, early, orphan)  # listed at start-up
    config = work_dir / "config.yaml"
    config.write_text(CONFIG)
    watch = PodWatch(client, late)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=["--config", str(config)]):
            rule = "quota {0}: parent quota no-such-parent does not exist"
            wait_for_event(client, early, early, "InvalidElasticQuota", rule.format(early))
            create_quota(client, late, orphan)  # seen by the watch
            wait_for_event(client, late, late, "InvalidElasticQuota", rule.format(late))
            create_pod(client, late, "p", ONE_GPU)
            watch.wait_for(
                lambda pods: any(
                    (condition(p) or ("", "", ""))[2].endswith(f"quota {late} is invalid: {rule.format(late)}.")
                    for p in pods
                ),
                "the pod refused with the quota's rule",
            )
    finally:
        watch.stop()
