"""A quota's figures from the shared QuotaManager, and the patches that write only what differs."""

from __future__ import annotations

import dataclasses
import json

from apis.extension import names
from apis.k8s.meta import Condition
from controller.quotas.status import (
    CONDITION_VALID,
    REASON_INVALID,
    QuotaFigures,
    annotations_patch,
    status_patch,
    valid_condition,
)
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr

GPU = names.GPU_CORE


def tree() -> QuotaManager:
    """parent (min 800, max 800) over team-a (min 400) and team-b (min 400, idle); 8 GPUs."""
    m = QuotaManager()
    m.set_cluster_total({GPU: 800})
    child = {names.LABEL_QUOTA_PARENT: "parent"}
    m.set_quotas(
        [
            quota_cr("parent", labels={names.LABEL_QUOTA_IS_PARENT: "true"}, min={GPU: 800}, max={GPU: 800}),
            quota_cr("team-a", labels=child, min={GPU: 400}, max={GPU: 800}, namespace="team-a"),
            quota_cr("team-b", labels=child, min={GPU: 400}, max={GPU: 800}, namespace="team-b"),
        ]
    )
    return m


def test_figures_of_a_borrowing_leaf_and_its_parent() -> None:
    m = tree()
    m.update_pod(make_pod("a1", namespace="team-a", node="n1", gpu_core=600))
    keep = make_pod("a2", namespace="team-a", node="n1", gpu_core=100, labels={names.LABEL_QUOTA_PREEMPTIBLE: "false"})
    m.update_pod(keep)
    m.update_pod(make_pod("a3", namespace="team-a", gpu_core=100))  # pending: request only
    leaf = QuotaFigures.of(m, "team-a", {GPU: 400})
    assert leaf.used == {GPU: 700} and leaf.allocated == {GPU: 700}
    assert leaf.request == {GPU: 800} and leaf.runtime == {GPU: 800}  # team-b idle: a borrows it all
    assert leaf.guaranteed == {GPU: 700}  # max(min 400, allocated 700)
    assert leaf.non_preemptible_used == {GPU: 100}
    assert m.subtree_used("parent") == {GPU: 700}
    parent = QuotaFigures.of(m, "parent", {GPU: 800})  # its children's use counts in its own
    assert parent.used == {GPU: 700} and parent.guaranteed == {GPU: 800}
    assert parent.non_preemptible_used == {GPU: 100}


def test_annotations_in_koordinator_shape_and_patched_only_when_different() -> None:
    m = tree()
    m.update_pod(make_pod("a1", namespace="team-a", node="n1", gpu_core=200))
    figures = QuotaFigures.of(m, "team-a", {GPU: 400})
    annotations = figures.annotations()
    assert json.loads(annotations[names.ANNOTATION_QUOTA_RUNTIME]) == {GPU: "200"}
    assert json.loads(annotations[names.ANNOTATION_QUOTA_GUARANTEED]) == {GPU: "400"}
    assert annotations[names.ANNOTATION_QUOTA_NON_PREEMPTIBLE_USED] == "{}"
    quota = quota_cr("team-a", min={GPU: 400}, max={GPU: 800}, namespace="team-a")
    patch = annotations_patch(quota, figures)
    assert patch == {"metadata": {"annotations": annotations}}
    written = dataclasses.replace(quota, meta=dataclasses.replace(quota.meta, annotations=annotations))
    assert annotations_patch(written, figures) is None


def test_status_patch_removes_resources_gone_and_keeps_transition_time() -> None:
    valid = valid_condition([])
    since = "2026-01-01T00:00:00Z"
    current = (Condition(CONDITION_VALID, "True", *valid[1:], since),)
    assert status_patch({GPU: 100}, valid, current_used={GPU: 100}, current_conditions=current, now="later") is None
    patch = status_patch({GPU: 200}, valid, current_used={GPU: 100, "cpu": 1000}, current_conditions=current, now="t")
    assert patch is not None
    assert patch["status"]["used"] == {GPU: "200", "cpu": None}
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == since
    broken = valid_condition(["parent quota x does not exist"])
    assert broken == ("False", REASON_INVALID, "parent quota x does not exist")
    patch = status_patch({GPU: 100}, broken, current_used={GPU: 100}, current_conditions=current, now="t2")
    assert patch == {
        "status": {
            "conditions": [
                {
                    "type": CONDITION_VALID,
                    "status": "False",
                    "lastTransitionTime": "t2",
                    "reason": REASON_INVALID,
                    "message": "parent quota x does not exist",
                }
            ]
        }
    }
