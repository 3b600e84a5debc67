"""RBAC: each component's ServiceAccount may make exactly the calls its code makes, no more.

`NEEDED` (tests/support/rbac.py) lists every (verb, API group, resource, namespace, name) a
component calls, each with the code that calls it. The test evaluates the shipped Roles and bindings the way the API
server's RBAC authorizer does and checks both directions: every needed call is allowed, and
every grant is one that is needed. A component that starts calling something new fails here
until its row and its Role are added together.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from apis.extension import names
from apiserver.authz import bootstrap
from cli.localcluster import identities, ownnames
from kube import catalogue
from tests.support import manifests
from tests.support.manifests import NAMESPACE, Manifest
from tests.support.rbac import ANY, CORE, DEVICES, LEASES, NEEDED, NEEDED_LOCALLY, NON_RESOURCE, Call


@dataclass(frozen=True)
class Grant:
    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]  # empty: any name
    namespace: str | None  # None: every namespace (ClusterRoleBinding)
    source: str

    def allows(self, call: Call) -> bool:
        scope_ok = self.namespace is None or self.namespace == call.namespace
        name_ok = not self.names or (call.name is not None and call.name in self.names)
        return (
            scope_ok
            and name_ok
            and (call.verb in self.verbs or "*" in self.verbs)
            and (call.group in self.groups or "*" in self.groups)
            and (call.resource in self.resources or "*" in self.resources)
        )

    def calls(self) -> set[Call]:
        """Every call this grant allows, spelled as NEEDED spells them."""
        return {
            Call(verb, group, resource, self.namespace, name)
            for verb in self.verbs
            for group in self.groups
            for resource in self.resources
            for name in (sorted(self.names) or [ANY])
        }


def _role(objects: Sequence[Manifest] | None, kind: str, name: str, namespace: str | None) -> Manifest | None:
    """The role a binding names: in deploy/ (`objects` None) or among `objects`, else one of
    kube-apiserver's bootstrap ClusterRoles."""
    if objects is None:
        return manifests.role(kind, name, namespace)
    found = [m for m in objects if (m.kind, m.name, m.namespace) == (kind, name, namespace)]
    if found:
        return found[0]
    if kind == "ClusterRole" and name in bootstrap.CLUSTER_ROLES:
        rules = bootstrap.CLUSTER_ROLES[name]
        return Manifest(
            "(kube-apiserver's bootstrap policy)", {"kind": kind, "metadata": {"name": name}, "rules": rules}
        )
    return None


def grants_of(
    service_account: str, namespace: str = NAMESPACE, objects: Sequence[Manifest] | None = None
) -> list[Grant]:
    """The rules bound to a ServiceAccount, with where they apply, as the RBAC authorizer sees them:
    in deploy/ (`objects` None), or in the objects given (and kube's bootstrap ClusterRoles)."""
    found = []
    bindings = (
        manifests.of_kind("ClusterRoleBinding", "RoleBinding")
        if objects is None
        else [m for m in objects if m.kind in ("ClusterRoleBinding", "RoleBinding")]
    )
    for binding in bindings:
        subjects = binding.obj.get("subjects") or []
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == service_account and s["namespace"] == namespace
            for s in subjects
        ):
            continue
        ref = binding.obj["roleRef"]
        role = _role(objects, ref["kind"], ref["name"], binding.namespace if ref["kind"] == "Role" else None)
        assert role is not None, f"{binding}: role {ref['name']} not found"
        for rule in role.obj.get("rules") or []:
            urls = rule.get("nonResourceURLs")
            found.append(
                Grant(
                    frozenset(rule["verbs"]),
                    frozenset([NON_RESOURCE] if urls else rule["apiGroups"]),
                    frozenset(urls or rule["resources"]),
                    frozenset(rule.get("resourceNames") or ()),
                    binding.namespace if binding.kind == "RoleBinding" else None,
                    f"{role} via {binding}",
                )
            )
    return found


def allowed(service_account: str, call: Call, objects: Sequence[Manifest] | None = None) -> bool:
    return any(g.allows(call) for g in grants_of(service_account, objects=objects))


def up_objects() -> list[Manifest]:
    """Everything `tessera up` applies of RBAC: deploy/'s under its own names, and LOCAL_ROLES."""
    applied = [*ownnames.own(identities.rbac_manifests()), *identities.LOCAL_ROLES]
    return [Manifest("(tessera up)", doc) for doc in applied]


@pytest.mark.parametrize("service_account", sorted(NEEDED))
def test_every_call_the_component_makes_is_allowed(service_account: str) -> None:
    refused = sorted((call for call in NEEDED[service_account] if not allowed(service_account, call)), key=str)
    assert refused == []


@pytest.mark.parametrize("service_account", sorted(NEEDED))
def test_nothing_else_is_granted(service_account: str) -> None:
    extra = sorted(
        (
            (call, g.source)
            for g in grants_of(service_account)
            for call in g.calls()
            if call not in NEEDED[service_account]
        ),
        key=str,
    )
    assert extra == []


@pytest.mark.parametrize("m", manifests.of_kind("Role", "ClusterRole"), ids=str)
def test_no_wildcards(m: Manifest) -> None:
    for rule in m.obj["rules"]:
        assert "*" not in rule["verbs"] + rule.get("apiGroups", []) + rule.get("resources", []), rule
        assert "*" not in rule.get("nonResourceURLs", []), rule


def test_the_metrics_reader_reads_metrics_and_nothing_else() -> None:
    # For Prometheus-style scrapers (docs/security.md); only the optional dashboard is bound to it.
    reader = manifests.find("ClusterRole", "tessera-metrics-reader")
    assert reader is not None
    assert reader.obj["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    bindings = manifests.of_kind("ClusterRoleBinding", "RoleBinding")
    bound = [b.path for b in bindings if b.obj["roleRef"]["name"] == "tessera-metrics-reader"]
    assert bound == ["dashboard/dashboard-rbac.yaml"]


def test_each_workload_runs_as_a_service_account_with_a_table() -> None:
    accounts = sorted(manifests.pod_spec(w)["serviceAccountName"] for w in manifests.workloads())
    assert accounts == sorted(NEEDED)
    assert sorted(m.name for m in manifests.of_kind("ServiceAccount")) == sorted(NEEDED)


@pytest.mark.parametrize(
    ("workload", "lease"),
    [
        ("tessera-scheduler", names.SCHEDULER_NAME),
        ("tessera-controller", "tessera-controller"),
        ("tessera-descheduler", "tessera-descheduler"),
    ],
)
def test_the_lease_in_the_table_is_the_one_the_component_uses(
    workload: str, lease: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (container,) = manifests.containers(manifests.workload(workload))
    settings = manifests.settings(container, monkeypatch)
    election = getattr(settings, "leader_election", None) or settings.manager.leader_election
    assert (election.namespace, election.lease_name) == (NAMESPACE, lease)
    assert Call("update", *LEASES, NAMESPACE, lease) in NEEDED[workload]


def test_the_evaluator_can_refuse() -> None:
    # Examples of what must stay refused, so the evaluator is seen to say no.
    assert not allowed("tessera-agent", Call("patch", CORE, "nodes"))
    assert not allowed("tessera-agent", Call("delete", CORE, "events", "default"))
    assert not allowed("tessera-scheduler", Call("update", *DEVICES))
    assert not allowed("tessera-scheduler", Call("update", *LEASES, NAMESPACE, "tessera-controller"))
    assert not allowed("tessera-scheduler", Call("update", *LEASES, "kube-system", names.SCHEDULER_NAME))
    assert not allowed("tessera-controller", Call("delete", CORE, "events", "ml"))
    assert not allowed("tessera-controller", Call("delete", CORE, "pods", "ml"))
    assert not allowed("tessera-controller", Call("create", CORE, "pods/binding", "ml"))
    for account in NEEDED:
        assert not allowed(account, Call("get", CORE, "secrets", "ml"))


@pytest.mark.parametrize("service_account", sorted({*NEEDED, *NEEDED_LOCALLY}))
def test_tessera_up_grants_exactly_the_same_calls(service_account: str) -> None:
    # deploy/'s roles under tessera up's own names, plus its own (identities.LOCAL_ROLES), are
    # checked against the same table: renaming loses nothing and LOCAL_ROLES grants no more.
    objects = up_objects()
    needed = {**NEEDED, **NEEDED_LOCALLY}[service_account]
    assert sorted((c for c in needed if not allowed(service_account, c, objects)), key=str) == []
    granted = {call for g in grants_of(service_account, objects=objects) for call in g.calls()}
    assert sorted(granted - needed, key=str) == []


def test_every_rule_names_a_catalogued_resource() -> None:
    # Every resource a rule of deploy/, the chart (the same objects) or tessera up names is one
    # of kube.catalogue's. (`/status` of a CRD without the subresource is needed all the same:
    # a cluster may carry an older CRD that has it, and kube/status.py writes there then.)
    other_subresources = {("", "pods/binding"), ("", "pods/eviction"), ("", "nodes/finalizers")}
    roles = [*manifests.of_kind("Role", "ClusterRole"), *(m for m in up_objects() if m.kind.endswith("Role"))]
    unknown = []
    for role in roles:
        for rule in role.obj.get("rules") or []:
            for group in rule.get("apiGroups") or ():
                for resource in rule.get("resources") or ():
                    plural, _, sub = resource.partition("/")
                    gvr = catalogue.for_resource(group, plural)
                    if gvr is None or (sub and sub != "status" and (group, resource) not in other_subresources):
                        unknown.append(f"{role}: {group}/{resource}")
    assert unknown == []
