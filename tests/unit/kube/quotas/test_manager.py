"""QuotaManager: request and used kept exact through pod events, Reserve/Unreserve, quota edits."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from apis.extension import names
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr


def manager() -> QuotaManager:
    m = QuotaManager()
    m.set_cluster_total({"cpu": 10_000, names.GPU_CORE: 800})
    m.set_quotas(
        [
            quota_cr("team-a", min={"cpu": "4", names.GPU_CORE: 400}, max={"cpu": "10", names.GPU_CORE: 800}),
            quota_cr("team-b", min={"cpu": "4", names.GPU_CORE: 400}, max={"cpu": "10", names.GPU_CORE: 800}),
        ]
    )
    return m


def test_pods_without_quota_are_always_admitted() -> None:
    m = manager()
    assert m.admit(make_pod("p", namespace="elsewhere", cpu=999_000)).admitted


def test_borrow_up_to_idle_then_refuse_with_koordinator_message() -> None:
    m = manager()
    first = make_pod("a1", namespace="team-a", extra={names.NVIDIA_GPU: 6})
    assert m.admit(first).admitted  # 600 of 800 gpu-core: 200 borrowed from idle team-b
    m.reserve(first)
    assert m.used("team-a") == {names.GPU_CORE: 600, names.GPU_MEMORY_RATIO: 600}
    second = make_pod("a2", namespace="team-a", extra={names.NVIDIA_GPU: 2})
    assert m.admit(second).admitted
    m.reserve(second)
    b = make_pod("b1", namespace="team-b", gpu_core=400)
    # b's arrival (pending, from the informer) takes its min back in the runtime: a is now above
    # its runtime (reclaim's job, not admission's).
    m.update_pod(b)
    assert m.admit(b).admitted
    assert m.runtime("team-a")[names.GPU_CORE] == 400
    third = make_pod("a3", namespace="team-a", gpu_core=100)
    verdict = m.admit(third)
    assert not verdict.admitted and verdict.exceeded == (names.GPU_CORE,)
    assert verdict.message == (
        "Insufficient quotas, quotaName: team-a, runtime: {koordinator.sh/gpu-core: 400}, "
        "used: {koordinator.sh/gpu-core: 800}, pod's request: {koordinator.sh/gpu-core: 100}, "
        "exceedDimensions: [koordinator.sh/gpu-core], max: {koordinator.sh/gpu-core: 800}"
    )


def test_unreserve_and_delete_keep_used_exact() -> None:
    m = manager()
    pod = make_pod("a1", namespace="team-a", cpu=3000)
    m.reserve(pod)
    m.unreserve(pod)
    m.unreserve(pod)
    assert m.used("team-a") == {}
    bound = make_pod("a1", namespace="team-a", node="n1", cpu=3000)
    m.update_pod(bound)
    m.update_pod(bound)
    assert m.used("team-a") == {"cpu": 3000}
    m.remove_pod(bound)
    assert (m.used("team-a"), m.request("team-a")) == ({}, {})


def test_non_preemptible_pod_must_fit_within_min() -> None:
    m = manager()
    label = {names.LABEL_QUOTA_PREEMPTIBLE: "false"}
    big = make_pod("a1", namespace="team-a", labels=label, cpu=5000)
    verdict = m.admit(big)
    assert verdict.message.startswith("Insufficient non-preemptible quotas, quotaName: team-a")
    assert verdict.message.endswith("min: {cpu: 4}")


def test_quota_edit_reassigns_pods() -> None:
    m = QuotaManager()
    m.set_cluster_total({"cpu": 10_000})
    pod = make_pod("p", namespace="ns", node="n", cpu=2000)
    m.update_pod(pod)
    assert m.used("koordinator-default-quota") == {"cpu": 2000}
    m.set_quota(quota_cr("ns", max={"cpu": "5"}))
    assert (m.used("ns"), m.used("koordinator-default-quota")) == ({"cpu": 2000}, {})


def test_invalid_quota_is_reported_and_refuses_its_pods() -> None:
    m = QuotaManager()
    m.set_quota(quota_cr("x", labels={names.LABEL_QUOTA_PARENT: "nope"}, max={"cpu": "1"}))
    assert m.problems() == {"x": ["quota x: parent quota nope does not exist"]}
    verdict = m.admit(make_pod("p", namespace="x", cpu=1))
    assert verdict.message == "quota x is invalid: quota x: parent quota nope does not exist"


def test_admit_changes_nothing_for_a_pod_it_was_not_told_of() -> None:
    m = manager()
    m.update_pod(make_pod("a1", namespace="team-a", node="n", cpu=6000))
    m.update_pod(make_pod("b1", namespace="team-b", cpu=4000))
    before = (m.request("team-a"), m.runtime("team-a"), m.runtime("team-b"))
    asked = make_pod("explain-me", namespace="team-a", cpu=1000)
    # team-a: used 6 + 1 against a runtime of 6 (its request 7 counts the pod being asked about).
    assert m.admit(asked).exceeded == ("cpu",)
    assert (m.request("team-a"), m.runtime("team-a"), m.runtime("team-b")) == before


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "bind", "reserve", "unreserve", "delete", "quota"]),
        st.integers(0, 5),  # pod index
        st.sampled_from(["team-a", "team-b", "other"]),
    ),
    max_size=30,
)


@given(_OPS)
def test_used_and_request_stay_exact_through_any_sequence(ops: list[tuple[str, int, str]]) -> None:
    """Whatever the order of pod events, Reserve/Unreserve and quota edits, used and request
    equal a recount from the pods' final state."""
    m = manager()
    pods: dict[int, tuple[str, bool, bool]] = {}  # index -> (namespace, bound, reserved)
    for op, i, ns in ops:
        pod = make_pod(
            f"p{i}", namespace=pods.get(i, (ns,))[0], node="n" if pods.get(i, ("", False))[1] else "", cpu=1000
        )
        if op == "add" and i not in pods:
            m.update_pod(pod)
            pods[i] = (pod.namespace, False, False)
        elif op == "bind" and i in pods:
            m.update_pod(dataclasses.replace(pod, node_name="n"))
            pods[i] = (pod.namespace, True, False)
        elif op == "reserve" and i in pods:
            m.reserve(pod)
            pods[i] = (pod.namespace, pods[i][1], not pods[i][1])
        elif op == "unreserve" and i in pods:
            m.unreserve(pod)
            pods[i] = (pod.namespace, pods[i][1], False)
        elif op == "delete" and i in pods:
            m.remove_pod(pod)
            del pods[i]
        elif op == "quota":
            m.set_quota(quota_cr(ns, max={"cpu": str(i + 1)}))
    for quota in ("team-a", "team-b", "other"):
        mine = [state for state in pods.values() if m.quota_of(make_pod(namespace=state[0])) == quota]
        assert m.request(quota) == ({"cpu": 1000 * len(mine)} if mine else {})
        used = sum(1 for _, bound, reserved in mine if bound or reserved)
        assert m.used(quota) == ({"cpu": 1000 * used} if used else {})


def test_root_total_excludes_what_default_quota_pods_use_not_what_they_ask() -> None:
    m = manager()
    m.update_pod(make_pod("huge", namespace="elsewhere", extra={names.NVIDIA_GPU: 16}))  # pending, default quota
    assert m.runtime("koordinator-root-quota")[names.GPU_CORE] == 800
    m.update_pod(make_pod("placed", namespace="elsewhere", node="n1", extra={names.NVIDIA_GPU: 2}))
    assert m.runtime("koordinator-root-quota")[names.GPU_CORE] == 600
