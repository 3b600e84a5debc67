"""The quota rules of Koordinator's pod webhook (vpod.koordinator.sh), on AdmissionReview requests."""

from __future__ import annotations

from typing import Any

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from controller.webhook import pod
from tests.support.quotas import elastic_quota

QUOTAS = [
    ElasticQuota.from_dict(q)
    for q in (
        elastic_quota("org", namespace="ns", is_parent=True, min_gpu="4"),
        elastic_quota("team", namespace="ns", parent="org"),
        elastic_quota("parent-ns", namespace="parent-ns", is_parent=True),
    )
]


def a_pod(namespace: str = "ns", **labels: str) -> dict[str, Any]:
    meta = {"name": "pod-example", "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def review(operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> pod.quota.Decision:
    request = {"uid": "u", "operation": operation, "object": obj, "oldObject": old}
    return pod.review(request, QUOTAS)


def test_a_pod_in_a_parent_quota_is_refused_in_koordinators_words() -> None:
    decision = review("CREATE", a_pod(**{names.LABEL_QUOTA_NAME: "org"}))
    assert decision.message == "pod can not be linked to a parentQuotaGroup,quota:org, pod:pod-example"
    assert decision.response("u")["status"]["code"] == 403
    # The quota found as the scheduler finds it: a parent named after the pod's namespace too.
    assert not review("CREATE", a_pod(namespace="parent-ns")).allowed
    assert not review("UPDATE", a_pod(**{names.LABEL_QUOTA_NAME: "org"}), a_pod()).allowed


def test_a_pod_in_a_child_quota_or_none_is_allowed() -> None:
    assert review("CREATE", a_pod(**{names.LABEL_QUOTA_NAME: "team"})).allowed
    assert review("CREATE", a_pod()).allowed
    assert review("CREATE", a_pod(**{names.LABEL_QUOTA_NAME: "nowhere"})).allowed  # the default quota
    assert review("DELETE", a_pod(**{names.LABEL_QUOTA_NAME: "org"})).allowed
    assert review("CREATE", {"metadata": "not a pod"}).allowed  # the API server's to refuse


def test_a_quota_the_cache_does_not_have_yet_is_read_fresh() -> None:
    request = {"uid": "u", "operation": "CREATE", "object": a_pod(**{names.LABEL_QUOTA_NAME: "org"})}
    assert pod.review(request, QUOTAS[1:]).allowed  # the cache alone: the default quota
    assert not pod.review(request, QUOTAS[1:], fresh=lambda: QUOTAS).allowed


def test_the_preemptible_label_may_not_change() -> None:
    before = a_pod(**{names.LABEL_QUOTA_NAME: "team"})
    after = a_pod(**{names.LABEL_QUOTA_NAME: "team", names.LABEL_QUOTA_PREEMPTIBLE: "false"})
    assert review("UPDATE", after, before).message == "Preemptible label is forbidden modify now."
    assert review("UPDATE", after, after).allowed
