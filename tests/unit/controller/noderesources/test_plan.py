"""What to change on a Node and whether it can wait: urgent changes, the diff threshold, patches."""

from fractions import Fraction

import pytest

from apis.extension import names
from apis.k8s.core import Node
from controller.noderesources.desired import DeviceResources, from_device
from controller.noderesources.plan import ChangeKind, Observed, Plan, plan
from tests.unit.controller.noderesources.devices import NVIDIA_LABELS, GiB, make_device, make_node

TEN_PERCENT = Fraction(1, 10)


def observed(resources: dict[str, int], labels: dict[str, str] | None = None) -> Observed:
    return Observed.of(make_node(resources=resources, labels=labels))


def test_observed_sees_only_the_managed_part_of_a_node() -> None:
    node = make_node(resources={names.GPU_CORE: 800, "example.com/fpga": 2}, labels={names.LABEL_GPU_MODEL: "T4"})
    assert Observed.of(node) == Observed(
        allocatable={names.GPU_CORE: 800}, capacity={names.GPU_CORE: 800}, labels={names.LABEL_GPU_MODEL: "T4"}
    )


def test_nothing_to_do_when_the_node_already_matches() -> None:
    want = from_device(make_device(rdma=2))
    assert plan(observed(dict(want.resources), dict(want.labels)), want, threshold=TEN_PERCENT).empty


def test_a_new_node_gets_everything_at_once() -> None:
    want = from_device(make_device(rdma=1))
    got = plan(Observed(), want, threshold=TEN_PERCENT)
    assert got.urgent
    assert {c.kind for c in got.changes} == {ChangeKind.ADD}
    assert len(got.changes) == 2 * 5  # allocatable and capacity, five names each
    assert got.labels == NVIDIA_LABELS


def test_status_patch_names_only_what_changes_and_nulls_removals() -> None:
    current = observed({names.GPU_CORE: 800, names.GPU_MEMORY: 640 * GiB, names.RDMA: 200})
    want = DeviceResources({names.GPU_CORE: 700, names.GPU_MEMORY: 640 * GiB})
    patch = plan(current, want, threshold=TEN_PERCENT).status_patch()
    assert patch == {
        "status": {
            "allocatable": {names.GPU_CORE: "700", names.RDMA: None},
            "capacity": {names.GPU_CORE: "700", names.RDMA: None},
        }
    }


def test_quantities_are_written_in_canonical_form() -> None:
    patch = plan(Observed(), DeviceResources({names.GPU_MEMORY: 80 * GiB}), threshold=TEN_PERCENT).status_patch()
    assert patch is not None
    assert patch["status"]["allocatable"][names.GPU_MEMORY] == "80Gi"


def test_no_status_patch_when_only_labels_change() -> None:
    got = plan(Observed(labels={names.LABEL_GPU_MODEL: "T4"}), DeviceResources(), threshold=TEN_PERCENT)
    assert got.status_patch() is None
    assert got.labels == {names.LABEL_GPU_MODEL: None}
    assert got.urgent


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        (None, 100, ChangeKind.ADD),
        (100, None, ChangeKind.REMOVE),
        (800, 700, ChangeKind.DECREASE),
        (800, 799, ChangeKind.DECREASE),  # however small: the scheduler must not count a lost device
        (700, 800, ChangeKind.INCREASE),  # one GPU of eight back: 14%
        (1000, 1100, ChangeKind.INCREASE),  # exactly the threshold counts
        (1000, 1099, ChangeKind.SMALL_INCREASE),
        (1500, 1600, ChangeKind.SMALL_INCREASE),  # one GPU of sixteen back: 6.7%
        (0, 100, ChangeKind.INCREASE),  # from zero: any amount is infinitely many percent
    ],
    ids=["add", "remove", "decrease", "tiny-decrease", "gpu-back", "at-threshold", "below", "1-of-16", "from-zero"],
)
def test_change_kinds(old: int | None, new: int | None, kind: ChangeKind) -> None:
    current = observed({} if old is None else {names.GPU_CORE: old})
    want = DeviceResources({} if new is None else {names.GPU_CORE: new})
    changes = plan(current, want, threshold=TEN_PERCENT).changes
    assert {c.kind for c in changes} == {kind}
    assert all(c.urgent is (kind is not ChangeKind.SMALL_INCREASE) for c in changes)


def test_threshold_zero_makes_every_increase_urgent() -> None:
    got = plan(observed({names.GPU_CORE: 1000}), DeviceResources({names.GPU_CORE: 1001}), threshold=Fraction(0))
    assert got.urgent


def test_gpu_memory_increase_uses_exact_integer_arithmetic() -> None:
    old = 640 * GiB
    current = observed({names.GPU_MEMORY: old})

    def urgent(new: int) -> bool:
        return plan(current, DeviceResources({names.GPU_MEMORY: new}), threshold=TEN_PERCENT).urgent

    assert not urgent(old + old // 10 - 1)
    assert urgent(old + old // 10)


def test_a_small_increase_with_an_urgent_change_is_urgent_as_a_whole() -> None:
    current = observed({names.GPU_CORE: 1500, names.RDMA: 200})
    want = DeviceResources({names.GPU_CORE: 1600, names.RDMA: 100})
    got = plan(current, want, threshold=TEN_PERCENT)
    assert got.urgent
    assert {c.name for c in got.changes} == {names.GPU_CORE, names.RDMA}  # the increase rides along


def test_kubelet_overwrote_allocatable_only() -> None:
    """kubelet rewrote allocatable without our names; capacity still has them."""
    want = DeviceResources({names.GPU_CORE: 800})
    current = Observed(allocatable={}, capacity={names.GPU_CORE: 800})
    got = plan(current, want, threshold=TEN_PERCENT)
    assert got.status_patch() == {"status": {"allocatable": {names.GPU_CORE: "800"}}}


def test_describe_lists_changes_for_the_log() -> None:
    got = Plan(
        plan(observed({names.GPU_CORE: 800}), DeviceResources({names.GPU_CORE: 700}), threshold=TEN_PERCENT).changes,
        {names.LABEL_GPU_MODEL: None},
    )
    text = got.describe()
    assert f"allocatable[{names.GPU_CORE}]: 800 -> 700" in text
    assert f"label {names.LABEL_GPU_MODEL}: removed" in text


# --- deprecated spellings left by Koordinator before v1.2 --------------------------------------------
OLD_NODE = {
    "metadata": {"name": "n1"},
    "status": {
        "capacity": {"cpu": "64", names.DEPRECATED_GPU_CORE: "800", names.DEPRECATED_KOORD_GPU: "800"},
        "allocatable": {"cpu": "64", names.DEPRECATED_GPU_CORE: "800", names.DEPRECATED_KOORD_GPU: "800"},
    },
}


def test_the_current_names_are_written_beside_the_old_ones_which_are_left_alone() -> None:
    want = DeviceResources({names.GPU_CORE: 800, names.KOORD_GPU: 800})
    got = plan(Observed.of(Node.from_dict_as_written(OLD_NODE)), want, threshold=TEN_PERCENT)
    assert got.urgent
    assert got.status_patch() == {
        "status": {field: {names.GPU_CORE: "800", names.KOORD_GPU: "800"} for field in ("allocatable", "capacity")}
    }
    written = Node.from_dict_as_written(
        {"metadata": {"name": "n1"}, "status": {f: {**OLD_NODE["status"][f], **p} for f, p in _patch(got).items()}}
    )
    assert plan(Observed.of(written), want, threshold=TEN_PERCENT).empty


def test_the_old_names_are_not_taken_for_the_controllers_own() -> None:
    # Read in current names, the node would seem to carry koordinator.sh/gpu-core and gpu: with no
    # Device CR the controller would remove them, which changes nothing on the object, forever.
    assert plan(Observed.of(Node.from_dict_as_written(OLD_NODE)), DeviceResources(), threshold=TEN_PERCENT).empty
    assert not plan(Observed.of(Node.from_dict(OLD_NODE)), DeviceResources(), threshold=TEN_PERCENT).empty


def _patch(got: Plan) -> dict[str, dict[str, str]]:
    patch = got.status_patch()
    assert patch is not None
    return {field: {k: v for k, v in values.items() if v is not None} for field, values in patch["status"].items()}


HAMI = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}


def test_the_isolation_provider_label_is_published_from_the_device() -> None:
    want = from_device(make_device(labels={**NVIDIA_LABELS, **HAMI}))
    assert want.labels == {**NVIDIA_LABELS, **HAMI}
    got = plan(observed(dict(want.resources), NVIDIA_LABELS), want, threshold=TEN_PERCENT)
    assert got.labels == HAMI
    assert got.urgent


def test_an_isolation_provider_label_the_device_does_not_carry_is_left_alone() -> None:
    # Koordinator's manual has operators label nodes by hand; an agent that does not see the
    # library must not take the label away.
    want = from_device(make_device())
    assert plan(observed(dict(want.resources), {**NVIDIA_LABELS, **HAMI}), want, threshold=TEN_PERCENT).empty


def test_an_operators_other_provider_is_overwritten_by_what_the_node_has() -> None:
    want = from_device(make_device(labels={**NVIDIA_LABELS, **HAMI}))
    current = observed(dict(want.resources), {**NVIDIA_LABELS, names.LABEL_GPU_ISOLATION_PROVIDER: "other"})
    assert plan(current, want, threshold=TEN_PERCENT).labels == HAMI
