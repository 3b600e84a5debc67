"""Lost objects, pods that fit but stay pending, and components that are not up."""

from __future__ import annotations

from apis.extension import names
from cli.bench.soak.invariants.liveness import MAY_WAIT, components_down, fitting_pending, lost
from tests.unit.cli.bench.soak.builders import HALF, WHOLE, node, pod, state

JOINT = {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}'}


def test_an_acknowledged_pod_that_is_gone_or_replaced_is_lost_unless_the_soak_deleted_it() -> None:
    pods = [pod("kept"), pod("replaced", uid="other")]
    acknowledged = {"soak/kept": "uid-kept", "soak/replaced": "uid-replaced", "soak/gone": "x", "soak/deleted": "y"}
    found = lost(state(pods, acknowledged=acknowledged, deleted=frozenset({"soak/deleted"})))
    assert [v.objects for v in found] == [("soak/gone",), ("soak/replaced",)]


def test_a_pending_pod_that_fits_is_reported_one_that_does_not_is_not() -> None:
    full = [pod(f"b{i}", node_name="n1", gpus={i: WHOLE}) for i in range(7)]
    one_left = state([*full, pod("fits"), pod("also-wants-it")], [node()])
    # One GPU left, two pods want it: the first (by creation, then name) fits, the second does not.
    assert [v.objects for v in fitting_pending(one_left)] == [("soak/also-wants-it",)]
    no_room = state([*full, pod("bound-7", node_name="n1", gpus={7: HALF}), pod("whole")], [node()])
    assert fitting_pending(no_room) == []


def test_shares_fit_into_a_partly_used_gpu_and_unhealthy_gpus_offer_nothing() -> None:
    half = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
    used = [pod(f"b{i}", node_name="n1", gpus={i: WHOLE if i else HALF}) for i in range(2)]
    assert [v.objects for v in fitting_pending(state([*used, pod("share", half)], [node(gpus=2)]))] == [("soak/share",)]
    assert fitting_pending(state([pod("whole")], [node(gpus=2, unhealthy=[0, 1])])) == []


def test_pods_that_may_wait_and_pods_being_deleted_are_not_judged() -> None:
    assert fitting_pending(state([pod("q", labels={MAY_WAIT: "true"}), pod("d", deleting=True)])) == []


def test_a_joint_gpu_rdma_pod_fits_only_where_its_switch_has_a_free_vf() -> None:
    request = {names.NVIDIA_GPU: "1", names.RDMA: "1"}
    # Two GPUs, each on a switch of its own with a NIC of 4 VFs; GPU 1 is free, but its NIC's VFs
    # are all held (and NIC 0's VFs are free, on the wrong switch).
    held = pod("b0", node_name="n1", gpus={0: WHOLE}, vfs={1: [0, 1, 2, 3]})
    assert fitting_pending(state([held, pod("mpi", request, annotations=JOINT)], [node(gpus=2)])) == []
    free = state([pod("b0", node_name="n1", gpus={0: WHOLE}), pod("mpi", request, annotations=JOINT)], [node(gpus=2)])
    assert [v.objects for v in fitting_pending(free)] == [("soak/mpi",)]


def test_a_gang_fits_only_when_all_its_pending_members_fit_together() -> None:
    gang = {names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "3"}
    members = [pod(f"g-{i}", annotations=gang) for i in range(3)]
    assert fitting_pending(state(members, [node(gpus=2)])) == []
    [violation] = fitting_pending(state(members, [node(gpus=3)]))
    assert violation.objects == ("gang soak/g", "soak/g-0", "soak/g-1", "soak/g-2")
    assert fitting_pending(state(members[:2], [node(gpus=3)])) == []  # a member short: never whole


def test_components_down_names_each() -> None:
    assert [v.objects for v in components_down({"apiserver": True, "agent/sim-1": False})] == [("agent/sim-1",)]
