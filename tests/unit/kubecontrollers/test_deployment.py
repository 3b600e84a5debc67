"""The Deployment controller's decisions (kubecontrollers.deployment): one rolling step at a time."""

import copy
from typing import Any

from kubecontrollers.deployment import HASH_LABEL, REVISION, sync_deployment, template_hash
from kubecontrollers.plan import Create, Patch
from tests.unit.kubecontrollers.objects import TEMPLATE, meta, owner

D = ("Deployment", "web", "uid-d")


def deployment(replicas: int, *, image: str = "x", strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["containers"][0]["image"] = image
    return {
        "metadata": meta("web", "uid-d"),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": template,
            "strategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        },
        "status": {},
    }


def rs_of(d: dict[str, Any], name: str, replicas: int, available: int, revision: int) -> dict[str, Any]:
    template = copy.deepcopy(d["spec"]["template"])
    template["metadata"]["labels"][HASH_LABEL] = "h"
    return {
        "metadata": meta(name, f"uid-{name}", ownerReferences=owner(*D), annotations={REVISION: str(revision)}),
        "spec": {"replicas": replicas, "template": template},
        "status": {"replicas": replicas, "availableReplicas": available, "readyReplicas": available},
    }


def scaled(plan_actions: list[Any]) -> dict[str, int]:
    return {
        a.name: a.patch["spec"]["replicas"]
        for a in plan_actions
        if isinstance(a, Patch) and a.resource.plural == "replicasets" and "spec" in a.patch
    }


def test_first_sync_creates_a_replicaset_named_after_the_template_hash() -> None:
    d = deployment(3)
    plan = sync_deployment(d, [], [])
    rs = next(a for a in plan.actions if isinstance(a, Create)).body
    digest = template_hash(d["spec"]["template"])
    assert rs["metadata"]["name"] == f"web-{digest}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: digest}
    assert rs["spec"]["template"]["metadata"]["labels"][HASH_LABEL] == digest
    assert rs["spec"]["replicas"] == 3 and rs["metadata"]["annotations"][REVISION] == "1"


def test_rolling_update_surges_by_one_and_keeps_every_old_pod_until_a_new_one_is_available() -> None:
    d = deployment(3, image="y")
    old = rs_of(deployment(3), "old", 3, 3, 1)
    new = rs_of(d, "new", 0, 0, 2)
    first = sync_deployment(d, [old, new], []).actions
    assert scaled(first) == {"new": 1}  # maxSurge 1, maxUnavailable 0
    told = next(a.note for a in first if isinstance(a, Patch) and a.note is not None)
    assert (told.reason, told.message) == ("ScalingReplicaSet", "Scaled up replica set new from 0 to 1")
    new = rs_of(d, "new", 1, 0, 2)
    assert scaled(sync_deployment(d, [old, new], []).actions) == {}  # waiting: the new pod is not available
    new = rs_of(d, "new", 1, 1, 2)
    assert scaled(sync_deployment(d, [old, new], []).actions) == {"old": 2}
    old, new = rs_of(deployment(3), "old", 0, 0, 1), rs_of(d, "new", 3, 3, 2)
    plan = sync_deployment(d, [old, new], [])
    status = next(a for a in plan.actions if isinstance(a, Patch) and a.subresource == "status").patch["status"]
    assert (status["updatedReplicas"], status["availableReplicas"], status["replicas"]) == (3, 3, 3)
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"


def test_recreate_scales_old_to_zero_and_waits_for_their_pods() -> None:
    d = deployment(2, image="y", strategy={"type": "Recreate"})
    old = rs_of(deployment(2), "old", 2, 2, 1)
    new = rs_of(d, "new", 0, 0, 2)
    old_pod = {"metadata": meta("p", "uid-p", ownerReferences=owner("ReplicaSet", "old", "uid-old")), "status": {}}
    assert scaled(sync_deployment(d, [old, new], [old_pod]).actions) == {"old": 0}
    old = rs_of(deployment(2), "old", 0, 0, 1)
    assert scaled(sync_deployment(d, [old, new], []).actions) == {"new": 2}


def test_a_scale_down_not_carried_out_yet_makes_no_room_for_a_surge() -> None:
    d = deployment(6, image="y")
    old = rs_of(deployment(6), "old", 5, 5, 1)
    old["status"] = {"replicas": 6, "availableReplicas": 6}  # its controller has not removed the pod yet
    new = rs_of(d, "new", 1, 1, 2)
    assert "new" not in scaled(sync_deployment(d, [old, new], []).actions)
    old["status"] = {"replicas": 5, "availableReplicas": 5}
    assert scaled(sync_deployment(d, [old, new], []).actions)["new"] == 2
