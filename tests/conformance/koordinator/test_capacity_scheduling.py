"""capacity-scheduling.md: elastic quotas by label and by namespace, and the webhook's refusals.

Quota names are cluster-wide, so every test deletes the quotas it made (children first). Not
here: the multi-quota-tree section (ElasticQuotaProfile, a feature gate of Koordinator's that
Tessera does not implement: docs/protocol.md) and the scheduler configuration snippets.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from tests.conformance.koordinator.koord import Koord, busybox_pod

DENIED = 'admission webhook "velasticquota.koordinator.sh" denied the request: '


def quota(name: str, *, labels: str, max_extra: str = "", min_cpu: str = "10") -> str:
    """The manual's quota: max 40 CPUs and 40Gi, min 10 CPUs (or `min_cpu`) and 20Mi."""
    return f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {name}
  labels:
{labels}spec:
  max:
    cpu: 40
    memory: 40Gi
{max_extra}  min:
    cpu: {min_cpu}
    memory: 20Mi
"""


@contextlib.contextmanager
def quotas(koord: Koord, ns: str, *names: str) -> Iterator[None]:
    """Delete the quotas `names` (children first) and the namespace's pods afterwards."""
    try:
        yield
    finally:
        koord.delete("pods", "--all", namespace=ns)
        for name in names:
            koord.up.kubectl("delete", "eq", name, "-n", ns, "--ignore-not-found", "--wait=true")


def quota_charged(koord: Koord, ns: str, name: str) -> dict[str, Any]:
    """The quota once the controller has charged the pod's 40m and 40Mi to it."""

    def charged(q: dict[str, Any]) -> Any:
        used = (q.get("status") or {}).get("used") or {}
        return used == {"cpu": "40m", "memory": "40Mi"} and q

    return dict(koord.wait("eq", name, charged, namespace=ns, what=f"{name} charged"))


def test_quick_start_by_label(koord: Koord) -> None:
    ns = koord.namespace("quota-label")
    labels = '    quota.scheduling.koordinator.sh/parent: ""\n    quota.scheduling.koordinator.sh/is-parent: "false"\n'
    with quotas(koord, ns, "quota-example"):
        out = koord.apply(quota("quota-example", labels=labels), namespace=ns)
        assert out.strip() == "elasticquota.scheduling.sigs.k8s.io/quota-example created"
        # (The manual's `kubectl get eqs` then lists "test-d": a leftover of its writer's cluster.)
        assert "quota-example" in koord.up.kubectl("get", "eqs", "-n", ns)
        labelled = busybox_pod("pod-example", labels='    quota.scheduling.koordinator.sh/name: "quota-example"\n')
        koord.apply(labelled, namespace=ns)
        found = quota_charged(koord, ns, "quota-example")
        annotations = found["metadata"]["annotations"]
        # Koordinator's exact JSON, as the manual shows it.
        assert annotations["quota.scheduling.koordinator.sh/request"] == '{"cpu":"40m","memory":"40Mi"}'
        assert annotations["quota.scheduling.koordinator.sh/runtime"] == '{"cpu":"40m","memory":"40Mi"}'
        # Not written (docs/protocol.md): Koordinator's mutating webhook fills in the parent label
        # (the root) and shared-weight (= max); Tessera reads both as those defaults.
        assert "quota.scheduling.koordinator.sh/shared-weight" not in annotations
        assert found["spec"] == {"max": {"cpu": 40, "memory": "40Gi"}, "min": {"cpu": 10, "memory": "20Mi"}}


def test_quick_start_by_namespace(koord: Koord) -> None:
    """A pod without the quota label uses the quota named after its namespace (the manual's
    namespace and quota are both `quota-example`; here both are the example's namespace)."""
    ns = koord.namespace("quota-ns")
    labels = '    quota.scheduling.koordinator.sh/parent: ""\n    quota.scheduling.koordinator.sh/is-parent: "false"\n'
    with quotas(koord, ns, ns):
        koord.apply(quota(ns, labels=labels), namespace=ns)
        koord.apply(busybox_pod("pod-example"), namespace=ns)
        found = quota_charged(koord, ns, ns)
        assert found["metadata"]["annotations"]["quota.scheduling.koordinator.sh/request"] == (
            '{"cpu":"40m","memory":"40Mi"}'
        )


PARENT_LABELS = "    quota.scheduling.koordinator.sh/is-parent: true\n"  # as the manual writes it
CHILD_LABELS = (
    "    quota.scheduling.koordinator.sh/is-parent: false\n"
    '    quota.scheduling.koordinator.sh/parent: "quota-parent-example"\n'
)


def quoted(manifest: str) -> str:
    """The manual's labels `is-parent: true` / `false` are YAML booleans, and a label value must be
    a string: kubectl refuses the object before sending it. Quoted, they are what was meant."""
    return manifest.replace("is-parent: true", 'is-parent: "true"').replace("is-parent: false", 'is-parent: "false"')


def parent(koord: Koord, ns: str, *, is_parent: str = "true") -> None:
    manifest = quota("quota-parent-example", labels=PARENT_LABELS.replace("true", is_parent))
    refused = koord.try_apply(manifest, namespace=ns)
    assert "cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string" in refused
    koord.apply(quoted(manifest), namespace=ns)
    # The pod webhook checks against the controller's cache: wait until the controller has seen it.
    koord.wait("eq", "quota-parent-example", lambda q: (q.get("status") or {}).get("conditions"), namespace=ns)


def test_the_childrens_mins_must_fit_the_parents(koord: Koord) -> None:
    ns = koord.namespace("quota-wh1")
    with quotas(koord, ns, "quota-example", "quota-parent-example"):
        parent(koord, ns)
        out = koord.try_apply(quoted(quota("quota-example", labels=CHILD_LABELS, min_cpu="20")), namespace=ns)
        # The manual's words are an older Koordinator's ("checkMinQuotaSum allChildren SumMinQuota >
        # parentMinQuota"); these are today's, then Tessera's naming the amounts.
        assert (
            DENIED + "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: quota-parent-example (" in out
        )
        assert "children's min[cpu] sum to 20, more than its min[cpu] 10" in out


TEST_200 = "    test: 200\n"


def test_a_child_may_not_add_a_resource_its_parent_lacks(koord: Koord) -> None:
    ns = koord.namespace("quota-wh2")
    with quotas(koord, ns, "quota-example", "quota-parent-example"):
        parent(koord, ns)
        out = koord.try_apply(quoted(quota("quota-example", labels=CHILD_LABELS, max_extra=TEST_200)), namespace=ns)
        # The manual's words ("checkSubAndParentGroupMaxQuotaKeySame failed") are an older
        # Koordinator's; today's say which keys.
        assert out.strip().endswith(
            DENIED + "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
            "quota-example's max keys are not all included in quota-parent-example's"
        ), out


def test_a_parent_quota_runs_no_pod(koord: Koord) -> None:
    ns = koord.namespace("quota-wh3")
    with quotas(koord, ns, "quota-parent-example"):
        parent(koord, ns)
        out = koord.try_apply(
            busybox_pod("pod-example", labels='    quota.scheduling.koordinator.sh/name: "quota-parent-example"\n'),
            namespace=ns,
        )
        assert out.strip().endswith(
            'admission webhook "vpod.koordinator.sh" denied the request: '
            "pod can not be linked to a parentQuotaGroup,quota:quota-parent-example, pod:pod-example"
        ), out


def test_a_quotas_parent_must_be_a_parent(koord: Koord) -> None:
    ns = koord.namespace("quota-wh4")
    with quotas(koord, ns, "quota-example", "quota-parent-example"):
        parent(koord, ns, is_parent="false")
        out = koord.try_apply(quoted(quota("quota-example", labels=CHILD_LABELS, max_extra=TEST_200)), namespace=ns)
        # The manual's words exactly, then Tessera's.
        assert (
            DENIED + "quota-example has parentName quota-parent-example but the parentQuotaInfo's IsParent is false ("
        ) in out, out


def test_is_parent_may_change_only_without_children(koord: Koord) -> None:
    """The manual says a quota's is-parent can never change ("IsParent is forbidden modify now"):
    an older Koordinator's rule. Today's refuses turning a parent with children into a child (and
    a quota with pods into a parent); the manual's parent, which has no children, may change."""
    ns = koord.namespace("quota-wh5")
    with quotas(koord, ns, "quota-example", "quota-parent-example"):
        parent(koord, ns)
        koord.apply(quoted(quota("quota-example", labels=CHILD_LABELS)), namespace=ns)
        flip = quoted(quota("quota-parent-example", labels=PARENT_LABELS.replace("true", "false")))
        out = koord.try_apply(flip, namespace=ns)
        assert (
            DENIED + "quota has children, isParent is forbidden to modify as false, quotaName:quota-parent-example"
        ) in out
        koord.up.kubectl("delete", "eq", "quota-example", "-n", ns, "--wait=true")
        assert "configured" in koord.apply(flip, namespace=ns)
        labels = json.loads(koord.up.kubectl("get", "eq", "quota-parent-example", "-n", ns, "-o", "json"))
        assert labels["metadata"]["labels"]["quota.scheduling.koordinator.sh/is-parent"] == "false"


def test_the_preemptible_label_as_the_manual_writes_it(koord: Koord) -> None:
    """`quota.scheduling.koordinator.sh/preemptible: false` unquoted is a YAML boolean: kubectl
    refuses it; quoted, the pod is protected from quota reclaim."""
    ns = koord.namespace("quota-preempt")
    labels = (
        '    quota.scheduling.koordinator.sh/name: "quota-example"\n'
        "    quota.scheduling.koordinator.sh/preemptible: false\n"
    )
    refused = koord.try_apply(busybox_pod("pod-example", labels=labels), namespace=ns)
    assert "cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string" in refused
    quoted_label = labels.replace("preemptible: false", 'preemptible: "false"')
    koord.apply(busybox_pod("pod-example", labels=quoted_label), namespace=ns)
    koord.delete("pods", "--all", namespace=ns)
