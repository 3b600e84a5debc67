"""The read side: explanations (every filter on every node, near misses), dry runs that leave
nothing behind, Koordinator's device summaries, and what Explain says in each pod state."""

from __future__ import annotations

import threading

from apis.crds.device import DeviceType
from apis.errors import ValidationError
from apis.extension import allocation, names
from apis.k8s.core import Pod, Taint, Toleration
from kube import errors
from scheduler.cache import PodInfo
from scheduler.core import Scheduler
from scheduler.framework import CycleState, Framework, ScoreTable
from scheduler.service.explain import evaluate
from scheduler.service.inspector import Inspector, PodState, device_summary
from scheduler.service.queue import QueueName, SchedulingQueue
from scheduler.service.scoretable import score_table
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_scheduler

TAINT = Taint("dedicated", "infra", names.TAINT_EFFECT_NO_SCHEDULE)


def cluster() -> Scheduler:
    """n1: 8 GPUs, 7 of them full; n2: tainted, free; n3: 8 GPUs, 6 full and one half used."""
    scheduler = make_scheduler(make_node("n1"), make_node("n2", taints=[TAINT]), make_node("n3"))
    cache = scheduler.cache
    cache.add_pod(bound_pod("full-1", "n1", *(gpu_alloc(m) for m in range(7))))
    cache.add_pod(bound_pod("full-3", "n3", *(gpu_alloc(m) for m in range(6)), gpu_alloc(6, 50), cpu=2000))
    return scheduler


def framework_of(scheduler: Scheduler) -> Framework:
    return scheduler.frameworks[names.SCHEDULER_NAME]


def test_every_rejection_on_every_node_and_the_nearest_misses() -> None:
    scheduler = cluster()
    pod = make_pod("two", nvidia_gpu=2)
    evaluation = evaluate(framework_of(scheduler), scheduler.cache, pod)
    assert evaluation.fits == ()
    verdicts = {v.node: [(s.plugin, s.message) for s in v.rejections] for v in evaluation.verdicts}
    assert verdicts["n2"][0][0] == "TaintToleration"
    assert ("DeviceShare", "Insufficient gpu devices") in verdicts["n1"]
    # n1 misses by one whole GPU, n3 by one and a half; the tainted node is no near miss.
    assert [node for node, _ in evaluation.nearest] == ["n1", "n3"]
    assert "gpu devices free, needs 2" in str(evaluation.nearest[0][1][0])
    # The summary is the one the scheduling cycle writes into the pod's condition.
    result = framework_of(scheduler).schedule(CycleState(), PodInfo.of(pod))
    assert evaluation.message == result.status.message
    assert evaluation.message.startswith("0/3 nodes are available: 2 Insufficient gpu devices")


def test_a_pod_that_fits_lists_where() -> None:
    scheduler = cluster()
    evaluation = evaluate(framework_of(scheduler), scheduler.cache, make_pod("half", gpu_core=50, gpu_ratio=50))
    assert evaluation.fits == ("n1", "n3") and evaluation.message == "2/3 nodes fit the pod now"
    tolerant = make_pod("t", tolerations=[Toleration("dedicated", "Equal", "infra", "")], nvidia_gpu=1)
    assert evaluate(framework_of(scheduler), scheduler.cache, tolerant).fits == ("n1", "n2", "n3")


def test_an_invalid_request_is_rejected_before_any_node() -> None:
    scheduler = cluster()
    evaluation = evaluate(framework_of(scheduler), scheduler.cache, make_pod("bad", gpu_core=150, gpu_ratio=150))
    assert evaluation.rejected is not None and evaluation.rejected.plugin == "DeviceShare"
    assert evaluation.verdicts == () and "must be <= 100 or a multiple of 100" in evaluation.message
    assert evaluation.message.startswith("0/3 nodes are available: invalid device request")


def inspector(
    scheduler: Scheduler, *, known: dict[str, Pod] | None = None, fetch_error: Exception | None = None
) -> Inspector:
    queue = SchedulingQueue(interest=lambda plugins, event: True)
    pods = dict(known or {})

    def lookup(namespace: str, name: str) -> Pod | None:
        return pods.get(f"{namespace}/{name}")

    def fetch(namespace: str, name: str) -> Pod | None:
        if fetch_error is not None:
            raise fetch_error
        return None

    for pod in pods.values():
        if not pod.node_name:
            queue.add(pod)
    return Inspector(
        lock=threading.RLock(),
        cache=scheduler.cache,
        frameworks=scheduler.frameworks,
        queue=queue,
        lookup=lookup,
        fetch=fetch,
        is_leader=lambda: True,
    )


def test_a_dry_run_returns_the_annotation_and_leaves_nothing_reserved() -> None:
    scheduler = cluster()
    before = {n: scheduler.cache.device_usage(n) for n in ("n1", "n2", "n3")}
    pods_before = len(scheduler.cache.pods())
    result = inspector(scheduler).dry_run(make_pod("half", gpu_core=50, gpu_ratio=50))
    assert result.node in ("n1", "n3") and result.status.is_success
    allocated = allocation.from_pod_annotations(result.annotations)
    assert [a.minor for a in allocated[DeviceType.GPU]] in ([7], [6])
    assert {n: scheduler.cache.device_usage(n) for n in ("n1", "n2", "n3")} == before
    assert len(scheduler.cache.pods()) == pods_before


def test_a_dry_run_of_a_pod_that_fits_nowhere_explains_why() -> None:
    result = inspector(cluster()).dry_run(make_pod("eight", nvidia_gpu=8))
    assert result.node is None and result.evaluation is not None
    assert "Insufficient gpu devices" in result.status.message


def test_explain_states() -> None:
    scheduler = cluster()
    pending = make_pod("pending", nvidia_gpu=2)
    other = make_pod("other", scheduler_name="default-scheduler")
    known = {p.key: p for p in (pending, other, bound_pod("full-1", "n1", *(gpu_alloc(m) for m in range(7))))}
    view = inspector(scheduler, known=known)
    bound = view.explain("default", "full-1")
    assert bound.state == PodState.BOUND and bound.node == "n1"
    assert [a.minor for a in bound.devices[DeviceType.GPU]] == list(range(7))
    waiting = view.explain("default", "pending")
    assert waiting.state == PodState.PENDING and waiting.queued is not None
    assert waiting.queued.queue is QueueName.ACTIVE
    assert waiting.evaluation is not None and [n for n, _ in waiting.evaluation.nearest] == ["n1", "n3"]
    assert view.explain("default", "other").state == PodState.NOT_OURS
    assert view.explain("default", "missing").state == PodState.NOT_FOUND
    unreadable = ValidationError("spec.containers[0].resources.requests.cpu", "bad quantity 'lots'", obj="pod x")
    broken = inspector(scheduler, fetch_error=unreadable).explain("default", "broken")
    assert broken.state == PodState.INVALID and "bad quantity 'lots'" in broken.detail
    down = inspector(scheduler, fetch_error=errors.Unreachable("connection refused")).explain("default", "x")
    assert down.state == PodState.NOT_FOUND and "cannot read the pod from the API server" in down.detail


def test_explain_notes_a_stale_allocation_on_a_pending_pod() -> None:
    stale = {names.ANNOTATION_DEVICE_ALLOCATED: allocation.encode({DeviceType.GPU: (gpu_alloc(7),)})}
    pod = make_pod("stale", annotations=stale, nvidia_gpu=1)
    explanation = inspector(cluster(), known={pod.key: pod}).explain("default", "stale")
    assert explanation.state == PodState.PENDING and "holds no devices" in explanation.detail
    # ... and it holds nothing: n1's last GPU is still free for it.
    assert explanation.evaluation is not None and "n1" in explanation.evaluation.fits


def test_explain_says_a_preemptor_is_nominated_and_its_room_kept() -> None:
    scheduler = cluster()
    pod = make_pod("urgent", nvidia_gpu=8)
    view = inspector(scheduler, known={pod.key: pod})
    assert "nominated" not in view.explain("default", "urgent").detail
    scheduler.cache.nominator.nominate(PodInfo.of(pod), "n2")
    assert view.explain("default", "urgent").detail == (
        "nominated to node n2 by preemption: its victims are being deleted, the room is kept for it"
    )


def test_explain_says_what_is_counted_for_a_bound_pod_with_an_unreadable_allocation() -> None:
    scheduler = cluster()
    garbage = {names.ANNOTATION_DEVICE_ALLOCATED: "{garbage"}
    kept = bound_pod("kept", "n3", gpu_alloc(7, 30), gpu_core=30, gpu_ratio=30)
    scheduler.cache.add_pod(kept)
    kept = make_pod("kept", node="n3", annotations=garbage, gpu_core=30, gpu_ratio=30)
    scheduler.cache.update_pod(kept)
    unknown = make_pod("unknown", node="n1", annotations=garbage, gpu_core=30, gpu_ratio=30)
    scheduler.cache.add_pod(unknown)
    view = inspector(scheduler, known={p.key: p for p in (kept, unknown)})
    said = view.explain("default", "kept")
    assert "not valid JSON" in said.detail and "keeps counting its last valid allocation" in said.detail
    assert [a.minor for a in said.devices[DeviceType.GPU]] == [7]
    said = view.explain("default", "unknown")
    assert "which devices it uses is unknown" in said.detail and "on n1" in said.detail
    assert said.devices == {}


def test_device_summary_has_koordinators_shape() -> None:
    scheduler = cluster()
    summary = device_summary(scheduler.cache.device_usage("n3"))
    assert set(summary) == {
        "deviceTotal",
        "deviceFree",
        "deviceUsed",
        "deviceTotalDetail",
        "deviceFreeDetail",
        "deviceUsedDetail",
        "allocateSet",
    }
    assert summary["deviceTotal"][names.GPU_CORE] == "800"
    assert summary["deviceUsed"][names.GPU_CORE] == "650"
    assert summary["deviceFree"][names.GPU_CORE] == "150"
    assert summary["deviceFreeDetail"]["gpu"]["6"][names.GPU_CORE] == "50"
    assert summary["allocateSet"]["gpu"]["default/full-3"]["6"][names.GPU_MEMORY] == "40Gi"
    assert summary["deviceTotalDetail"]["rdma"]["0"] == {names.RDMA: "100"}


def test_node_info_lists_pods_and_devices() -> None:
    info = inspector(cluster()).node_info("n3")
    assert info is not None
    assert [p["pod"] for p in info["pods"]] == ["default/full-3"]
    assert info["pods"][0]["assumed"] is False and info["pods"][0]["devices"]["gpu"][6]["minor"] == 6
    assert info["requested"] == {names.CPU: "2"}
    assert info["devices"][6]["free"][names.GPU_CORE] == "50"
    assert inspector(cluster()).node_info("nope") is None


def test_score_table_is_koordinators_markdown() -> None:
    table = ScoreTable(
        nodes=("n1", "n2", "n3"),
        plugins=("NodeResourcesFit", "DeviceShare"),
        scores=((50, 100), (90, 100), (90, 20)),
        totals=(150, 190, 110),
    )
    assert score_table("default/p", table, 2).splitlines() == [
        "| # | Pod | Node | Score | DeviceShare | NodeResourcesFit |",
        "| --- | --- | --- | ---:| ---:| ---:|",
        "| 0 | default/p | n2 | 190 | 100 | 90 |",
        "| 1 | default/p | n1 | 150 | 100 | 50 |",
    ]
