"""kube-apiserver's DefaultTolerationSeconds, as the embedded API server applies it on pod create."""

from __future__ import annotations

from typing import Any

from apiserver.pods import PodStrategy, default_toleration_seconds

_NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
_UNREACHABLE = {**_NOT_READY, "key": "node.kubernetes.io/unreachable"}


def _pod(tolerations: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def test_a_pod_without_tolerations_gets_both_for_300_s() -> None:
    pod = _pod()
    default_toleration_seconds(pod)
    assert pod["spec"]["tolerations"] == [_NOT_READY, _UNREACHABLE]


def test_a_pod_that_tolerates_one_keeps_its_own_and_gets_the_other() -> None:
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    pod = _pod([own])
    default_toleration_seconds(pod)
    assert pod["spec"]["tolerations"] == [own, _NOT_READY]


def test_a_toleration_of_everything_gets_nothing_added() -> None:
    pod = _pod([{"operator": "Exists"}])
    default_toleration_seconds(pod)
    assert pod["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_a_noschedule_toleration_does_not_count() -> None:
    other = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}
    pod = _pod([other])
    default_toleration_seconds(pod)
    assert pod["spec"]["tolerations"] == [other, _NOT_READY, _UNREACHABLE]


def test_create_defaults_them_and_a_malformed_list_is_left_to_validation() -> None:
    pod = _pod()
    PodStrategy().prepare_create(pod)
    assert _UNREACHABLE in pod["spec"]["tolerations"]
    broken = _pod()
    broken["spec"]["tolerations"] = "all"
    default_toleration_seconds(broken)
    assert broken["spec"]["tolerations"] == "all"
