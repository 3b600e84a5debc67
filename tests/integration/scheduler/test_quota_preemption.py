"""ElasticQuota's preemption live: API server and scheduler processes, quotas as CRs, pods and
evictions through the API.

Team A may use 4 GPUs of one 8-GPU node. Its pods of low priority fill the quota; a pod of
higher priority preempts them one at a time, lowest priority first, through the Eviction API,
is nominated to the node and bound there, while A's non-preemptible pods are never touched —
once only they are left, the next urgent pod waits with the quota's numbers. When the node
rather than the quota is full, the victims are those that free enough GPUs on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, resources
from tests.support import apiservers
from tests.support.cluster import PodWatch, condition, create_gpu_nodes, create_namespace, create_pod, wait_for_event

pytestmark = pytest.mark.integration

CONFIG = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]}}\n"
)
#: The same without DefaultPreemption: a nominee whose victims are "still going" cannot be set up
#: here (the embedded API server deletes a pod at once, nothing stays terminating), and with no
#: victim terminating on its nominated node a nominee preempts again, as in kube.
QUOTA_PREEMPTION_ONLY = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]},"
    " postFilter: {disabled: [{name: DefaultPreemption}]}}\n"
)
ONE_GPU = {names.NVIDIA_GPU: "1"}
PROTECTED = {names.LABEL_QUOTA_PREEMPTIBLE: "false"}


apiserver = apiservers.apiserver_fixture("function")


def create_quota(client: Client, namespace: str, gpu_core: str) -> None:
    client.resource(names.ELASTIC_QUOTAS).create(
        {
            "apiVersion": names.ELASTIC_QUOTAS.api_version,
            "kind": names.ELASTIC_QUOTAS.kind,
            "metadata": {"name": namespace, "namespace": namespace},
            "spec": {"min": {names.GPU_CORE: gpu_core}, "max": {names.GPU_CORE: gpu_core}},
        },
        namespace=namespace,
    )


def scheduler(apiserver: EmbeddedAPIServer, work_dir: Path, text: str = CONFIG) -> SchedulerProcess:
    config = work_dir / "config.yaml"
    config.write_text(text)
    return SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=["--config", str(config)])


def names_of(watch: PodWatch) -> set[str]:
    return {p.name for p in watch.pods()}


def bound_pod(pods: list[Pod], name: str) -> bool:
    return any(p.name == name and p.node_name for p in pods)


def pod_named(pods: list[Pod], name: str) -> Pod | None:
    return next((p for p in pods if p.name == name), None)


def refused(pod: Pod | None) -> bool:
    """The scheduler said it does not fit (PodScheduled=False)."""
    state = condition(pod) if pod is not None else None
    return state is not None and state[0] == "False"


def test_preemption_inside_a_quota_by_priority_never_non_preemptible(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "pre-n1")
    team = create_namespace(client, "team-a")
    create_quota(client, team, "400")
    watch = PodWatch(client, team)
    try:
        with scheduler(apiserver, work_dir):
            for i in range(2):
                create_pod(client, team, f"guard{i}", ONE_GPU, labels=PROTECTED, priority=0)
            create_pod(client, team, "low1", ONE_GPU, priority=1)
            create_pod(client, team, "low2", ONE_GPU, priority=2)
            watch.wait_bound(4)
            create_pod(client, team, "urgent1", ONE_GPU, priority=10)
            watch.wait_for(lambda pods: "low1" not in names_of(watch), "low1 evicted")
            bound = watch.wait_for(lambda pods: bound_pod(pods, "urgent1"), "urgent1 bound")
            assert {p.name for p in bound} == {"guard0", "guard1", "low2", "urgent1"}
            urgent = watch.pod("urgent1")
            assert (urgent.node_name, urgent.nominated_node_name) == ("pre-n1", "pre-n1")
            wait_for_event(
                client,
                team,
                "low1",
                "Preempted",
                "Preempted by team-a/urgent1 on node pre-n1 (quota team-a, priority 10)",
            )
            wait_for_event(
                client, team, "urgent1", "Preempting", "Preempting 1 pod on pre-n1 (quota team-a): team-a/low1"
            )
            # The next one takes low2's place; then only protected pods are left below it.
            create_pod(client, team, "urgent2", ONE_GPU, priority=10)
            watch.wait_for(lambda pods: "low2" not in names_of(watch) and bound_pod(pods, "urgent2"), "low2 out")
            create_pod(client, team, "urgent3", ONE_GPU, priority=10)

            def refused(pods: list[Pod]) -> bool:
                state = next((condition(p) for p in pods if p.name == "urgent3"), None)
                return state is not None and "Insufficient quotas, quotaName: team-a" in state[2]

            watch.wait_for(refused, "urgent3 refused by its quota")
            assert {"guard0", "guard1"} <= {p.name for p in watch.pods() if p.node_name}
            assert not watch.pod("urgent3").node_name
    finally:
        watch.stop()


def test_node_full_evicts_enough_gpus_and_nominates_the_node(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "pre-n2")
    team, other = create_namespace(client, "team-a"), create_namespace(client, "team-b")
    create_quota(client, team, "1600")
    create_quota(client, other, "800")
    watch, watch_other = PodWatch(client, team), PodWatch(client, other)
    try:
        with scheduler(apiserver, work_dir):
            for i in range(4):  # the node: 4 GPUs of team B (high priority), 4 of team A (low)
                create_pod(client, other, f"b{i}", ONE_GPU, priority=0)
                create_pod(client, team, f"a{i}", ONE_GPU, priority=i + 1)
            watch.wait_bound(4)
            watch_other.wait_bound(4)
            create_pod(client, team, "urgent", {names.NVIDIA_GPU: "2"}, priority=10)
            watch.wait_for(lambda pods: bound_pod(pods, "urgent"), "urgent bound")
            # The two lowest of team A went; team B's pods, of lower priority still, did not.
            assert names_of(watch) == {"a2", "a3", "urgent"}
            assert names_of(watch_other) == {"b0", "b1", "b2", "b3"}
            assert watch.pod("urgent").nominated_node_name == "pre-n2"
    finally:
        watch.stop()
        watch_other.stop()


def test_a_restarted_scheduler_keeps_the_room_of_a_nominated_pod(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "pre-n3")
    team = create_namespace(client, "team-a")
    watch = PodWatch(client, team)
    try:
        with scheduler(apiserver, work_dir, QUOTA_PREEMPTION_ONLY):
            for i in range(7):
                create_pod(client, team, f"low{i}", ONE_GPU, priority=0)
            watch.wait_bound(7)
        # While no scheduler runs: a pod nominated to the node (as a preemption leaves it, its
        # victims still going), and, once a scheduler is back, a pod that would fit the one
        # free GPU.
        create_pod(client, team, "nominee", {names.NVIDIA_GPU: "2"}, priority=10)
        pods = client.resource(resources.PODS)
        pods.patch("nominee", {"status": {"nominatedNodeName": "pre-n3"}}, namespace=team, subresource="status")
        with scheduler(apiserver, work_dir, QUOTA_PREEMPTION_ONLY):
            create_pod(client, team, "sneak", ONE_GPU, priority=0)
            watch.wait_for(lambda pods: refused(pod_named(pods, "sneak")), "sneak refused")
            pods.delete("low0", namespace=team)  # the victim goes: the room is the nominee's
            watch.wait_for(lambda pods: bound_pod(pods, "nominee"), "nominee bound")
            assert not watch.pod("sneak").node_name
    finally:
        watch.stop()
