"""RBAC: each component's ServiceAccount may make exactly the calls its code makes, no more.

`NEEDED` lists every (verb, API group, resource, namespace, name) a component calls, each with
the code that calls it. The test evaluates the shipped Roles and bindings the way the API
server's RBAC authorizer does and checks both directions: every needed call is allowed, and
every grant is one that is needed. A component that starts calling something new fails here
until its row and its Role are added together.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from apis import dra
from apis.extension import names
from apiserver.authz import bootstrap
from cli.localcluster import identities, ownnames
from kube import catalogue
from tests.unit.deploy import manifests
from tests.unit.deploy.manifests import NAMESPACE, Manifest

#: namespace None: every namespace (a ClusterRole bound cluster-wide), or a cluster-scoped resource.
ALL = None
#: name None: any object of the resource.
ANY = None
CORE = ""
DEVICES = (names.DEVICES.group, names.DEVICES.plural)
#: The "group" of a call to a non-resource URL (`get /metrics`), whose "resource" is its path.
NON_RESOURCE = "(non-resource URL)"
LEASES = ("coordination.k8s.io", "leases")


@dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str  # "pods", or "pods/binding" for a subresource
    namespace: str | None = ALL
    name: str | None = ANY


def calls(verbs: str, group: str, resource: str, namespace: str | None = ALL, name: str | None = ANY) -> set[Call]:
    return {Call(verb, group, resource, namespace, name) for verb in verbs.split()}


def delegated_auth() -> set[Call]:
    # kube/delegation.py Delegation: its HTTP endpoints (all but health) ask the API server who a
    # bearer token is (TokenReview) and whether they may (SubjectAccessReview), as kube-scheduler's
    # secure port does; kube's system:auth-delegator grants exactly these.
    return calls("create", "authentication.k8s.io", "tokenreviews") | calls(
        "create", "authorization.k8s.io", "subjectaccessreviews"
    )


def leader_election(lease: str) -> set[Call]:
    # kube/leaderelection.py LeaderElector: get the Lease, create it when missing, update it to
    # acquire, renew and release. RBAC cannot limit create by name.
    return calls("create", *LEASES, NAMESPACE) | calls("get update", *LEASES, NAMESPACE, lease)


NEEDED: dict[str, set[Call]] = {
    "tessera-scheduler": (
        # scheduler/service/informers.py ClusterFeed: Informers (list + watch) of pods, nodes, Devices.
        calls("list watch", CORE, "pods")
        | calls("list watch", CORE, "nodes")
        | calls("list watch", *DEVICES)
        # scheduler/plugins/elasticquota/feed.py QuotaFeed: a watch of ElasticQuotas (when a profile
        # enables the ElasticQuota plugin), run by scheduler/service/feeds.py PluginFeeds.
        | calls("list watch", names.ELASTIC_QUOTAS.group, names.ELASTIC_QUOTAS.plural)
        # scheduler/plugins/coscheduling/feed.py: watches of PodGroups (gang scheduling), Koordinator's
        # and scheduler-plugins', run by scheduler/service/feeds.py PluginFeeds.
        | calls("list watch", names.POD_GROUPS.group, names.POD_GROUPS.plural)
        | calls("list watch", names.UPSTREAM_POD_GROUPS.group, names.UPSTREAM_POD_GROUPS.plural)
        # scheduler/plugins/reservation/feed.py: the Reservation watch (list + watch, run by
        # scheduler/service/feeds.py PluginFeeds; scheduler/service/reservations follows it); ReservationAPI:
        # get (read before placing, and back), annotate (patch), bind and set_condition (patch
        # reservations/status); ReservationController: patch reservations/status (owners, expiry).
        | calls("get list watch patch", names.RESERVATIONS.group, names.RESERVATIONS.plural)
        | calls("patch", names.RESERVATIONS.group, f"{names.RESERVATIONS.plural}/status")
        # scheduler/service/podapi.py KubePodAPI: get (read back), annotate (patch),
        # set_condition and nominate (patch pods/status), bind (create pods/binding), delete
        # (a preemption victim, scheduler/service/preemptor.py; as kube-scheduler, not evicted).
        | calls("get patch delete", CORE, "pods")
        | calls("patch", CORE, "pods/status")
        | calls("create", CORE, "pods/binding")
        # scheduler/service/informers.py ClusterFeed: an Informer of PodDisruptionBudgets
        # (DefaultPreemption weighs them).
        | calls("list watch", "policy", "poddisruptionbudgets")
        # scheduler/plugins/deviceshare/templatefeed.py: a watch of the ConfigMap holding
        # DeviceShare's GPU shared-resource templates (any namespace the config names).
        | calls("list watch", CORE, "configmaps")
        # kube/events.py EventRecorder: create, then patch the count of a repeat. FailedScheduling
        # goes to the pod's namespace, FailedParsing (Device CRs) to `default`.
        # The DynamicResources plugin (issue 35: apis/dra's allocator, fed and written by the
        # scheduler's service): Informers of DeviceClasses, ResourceSlices and ResourceClaims; a
        # claim read back (get), its delete-protection finalizer put with the allocation (patch),
        # status.allocation and reservedFor written at PreBind (patch resourceclaims/status).
        | calls("list watch", dra.GROUP, dra.DEVICE_CLASSES.plural)
        | calls("list watch", dra.GROUP, dra.RESOURCE_SLICES.plural)
        | calls("get list watch patch", dra.GROUP, dra.RESOURCE_CLAIMS.plural)
        | calls("patch", dra.GROUP, f"{dra.RESOURCE_CLAIMS.plural}/status")
        | calls("create patch", CORE, "events")
        | leader_election(names.SCHEDULER_NAME)
        | delegated_auth()
    ),
    "tessera-controller": (
        # controller/noderesources/reconciler.py add_to_manager: Informers of Nodes and Devices;
        # NodeResourcesReconciler._write: patch nodes/status (resources) and nodes (labels).
        calls("list watch patch", CORE, "nodes")
        | calls("patch", CORE, "nodes/status")
        | calls("list watch", *DEVICES)
        # controller/quotas/reconciler.py add_to_manager: Informers of ElasticQuotas (the webhook,
        # controller/webhook/__init__.py for_manager, has one too), every pod
        # and Nodes; QuotaReconciler._write_status: patch elasticquotas (annotations) and
        # elasticquotas/status; QuotaReconciler._evict: create pods/eviction.
        | calls("list watch patch", names.ELASTIC_QUOTAS.group, names.ELASTIC_QUOTAS.plural)
        | calls("patch", names.ELASTIC_QUOTAS.group, f"{names.ELASTIC_QUOTAS.plural}/status")
        | calls("list watch", CORE, "pods")
        | calls("create", CORE, "pods/eviction")
        # controller/podgroups/reconciler.py add_to_manager: an Informer of PodGroups (and of the
        # labelled pods); PodGroupReconciler.reconcile: patch podgroups/status, which
        # kube/status.py StatusWriter sends to the object where the CRD has no status subresource
        # (Koordinator's and ours), as it does for ElasticQuotas.
        | calls("list watch patch", names.POD_GROUPS.group, names.POD_GROUPS.plural)
        | calls("patch", names.POD_GROUPS.group, f"{names.POD_GROUPS.plural}/status")
        # The same reconciler for scheduler-plugins' PodGroups, whose CRD has the status
        # subresource (theirs and ours): status only.
        | calls("list watch", names.UPSTREAM_POD_GROUPS.group, names.UPSTREAM_POD_GROUPS.plural)
        | calls("patch", names.UPSTREAM_POD_GROUPS.group, f"{names.UPSTREAM_POD_GROUPS.plural}/status")
        # controller/runtime/manager.py EventRecorder: Events about quotas and evicted pods go to
        # their namespaces; those about Nodes and Devices (cluster-scoped) to `default`.
        | calls("create patch", CORE, "events")
        | leader_election("tessera-controller")
        | delegated_auth()
    ),
    "tessera-descheduler": (
        # descheduler/app.py Descheduler: Informers (list + watch) of PodMigrationJobs, Reservations,
        # pods, and what the safety rules read (descheduler/arbitration/rules.py): ReplicaSets (a
        # Deployment's pods), Deployments, StatefulSets, PodDisruptionBudgets.
        calls("list watch", names.POD_MIGRATION_JOBS.group, names.POD_MIGRATION_JOBS.plural)
        | calls("list watch", names.RESERVATIONS.group, names.RESERVATIONS.plural)
        | calls("list watch", CORE, "pods")
        | calls("list watch", "apps", "replicasets")
        | calls("list watch", "apps", "deployments")
        | calls("list watch", "apps", "statefulsets")
        | calls("list watch", "policy", "poddisruptionbudgets")
        # descheduler/strategies/defrag.py Defragmentation._create: create PodMigrationJobs;
        # descheduler/migration/executor.py Executor: patch spec.podRef.uid (_admit), patch
        # podmigrationjobs/status (_write), create and delete Reservations (_create_reservation,
        # _delete_reservation), create pods/eviction (_evict).
        | calls("create patch", names.POD_MIGRATION_JOBS.group, names.POD_MIGRATION_JOBS.plural)
        | calls("patch", names.POD_MIGRATION_JOBS.group, f"{names.POD_MIGRATION_JOBS.plural}/status")
        | calls("create delete", names.RESERVATIONS.group, names.RESERVATIONS.plural)
        | calls("create", CORE, "pods/eviction")
        # kube/events.py EventRecorder: Events on pods (their namespaces) and PodMigrationJobs
        # (cluster-scoped, so `default`).
        | calls("create patch", CORE, "events")
        | leader_election("tessera-descheduler")
        | delegated_auth()
    ),
    "tessera-agent": (
        # agent/app.py: the Informer of the node's pods (list + watch, all namespaces: RBAC has
        # no field selectors); the Node's labels for the QoS config (get nodes).
        calls("list watch", CORE, "pods")
        | calls("get", CORE, "nodes")
        # agent/devices/reporter.py DeviceReporter: get, create or update (PUT) the node's Device CR, and
        # get the Node for its uid (the owner reference).
        | calls("get create update", *DEVICES)
        # The owner reference sets blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
        # admission plugin allows only with update on the owner's finalizers.
        | calls("update", CORE, "nodes/finalizers")
        # agent/qos/nodeslo.py NodeSLOWatch: an Informer (list + watch) of the node's NodeSLO.
        | calls("list watch", names.NODE_SLOS.group, names.NODE_SLOS.plural)
        # agent/hooks/collision.py DeviceCollisionPlugin, through kube/events.py EventRecorder: a
        # DeviceCollision Warning on a refused pod, in its namespace (create, then patch a repeat's count);
        # agent/qos/nodeslo.py: FailedParsing on a NodeSLO, a cluster-scoped object, so in `default`.
        | calls("create patch", CORE, "events")
        | delegated_auth()
    ),
    "tessera-dashboard": (
        # dashboard/sources.py ClusterSources: Informers (list + watch, every namespace) of the
        # Devices, pods, PodGroups (both groups), ElasticQuotas, Reservations and PodMigrationJobs it draws.
        calls("list watch", *DEVICES)
        | calls("list watch", CORE, "pods")
        | calls("list watch", names.POD_GROUPS.group, names.POD_GROUPS.plural)
        | calls("list watch", names.UPSTREAM_POD_GROUPS.group, names.UPSTREAM_POD_GROUPS.plural)
        | calls("list watch", names.ELASTIC_QUOTAS.group, names.ELASTIC_QUOTAS.plural)
        | calls("list watch", names.RESERVATIONS.group, names.RESERVATIONS.plural)
        | calls("list watch", names.POD_MIGRATION_JOBS.group, names.POD_MIGRATION_JOBS.plural)
        # dashboard/sources.py SchedulerPoller: the scheduler's /metrics, which it authorizes
        # through the API server (kube/delegation.py).
        | calls("get", NON_RESOURCE, "/metrics")
    ),
}


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


#: What only `tessera up` runs, granted by `identities.LOCAL_ROLES` (never by deploy/).
NEEDED_LOCALLY: dict[str, set[Call]] = {
    "tessera-kube-controller-manager": (
        # kubecontrollers/app.py: Informers of every kind below; kubecontrollers/loop.py performs
        # the plans: create, patch, delete (with propagation), and status patches.
        calls("get list watch create patch delete", CORE, "pods")
        | calls("get list watch create patch delete", "apps", "deployments")
        | calls("get list watch create patch delete", "apps", "replicasets")
        | calls("get list watch create patch delete", "apps", "statefulsets")
        | calls("get list watch create patch delete", "apps", "daemonsets")
        | calls("get list watch create patch delete", "batch", "jobs")
        | calls("get list watch create patch delete", "batch", "cronjobs")
        | calls("get list watch", "policy", "poddisruptionbudgets")
        | calls("patch", "apps", "deployments/status")
        | calls("patch", "apps", "replicasets/status")
        | calls("patch", "apps", "statefulsets/status")
        | calls("patch", "apps", "daemonsets/status")
        | calls("patch", "batch", "jobs/status")
        | calls("patch", "batch", "cronjobs/status")
        | calls("patch", "policy", "poddisruptionbudgets/status")
        # kube/events.py EventRecorder, for every controller.
        | calls("create patch", CORE, "events")
        # kubecontrollers/nodelifecycle.py (nodemonitor.py its I/O): watch Nodes, read their
        # Leases, mark them and their pods not ready, taint them.
        | calls("get list watch patch", CORE, "nodes")
        | calls("patch", CORE, "nodes/status")
        | calls("patch", CORE, "pods/status")
        | calls("get list watch", *LEASES)
        # kubecontrollers/resourceclaim.py (app.py its informers): claims made from pods'
        # templates, their consumers released, deallocated, unprotected (patch), deleted when
        # their pod will not run; templates read; a consumer the cache lacks is read (get pods).
        | calls("get list watch create patch delete", dra.GROUP, dra.RESOURCE_CLAIMS.plural)
        | calls("patch", dra.GROUP, f"{dra.RESOURCE_CLAIMS.plural}/status")
        | calls("list watch", dra.GROUP, dra.RESOURCE_CLAIM_TEMPLATES.plural)
        # kube/delegation.py: its /metrics, authorized through the API server.
        | delegated_auth()
    ),
    # Not a process: the identity a Prometheus pointed at tessera up scrapes with.
    "tessera-metrics-scraper": calls("get", NON_RESOURCE, "/metrics"),
}


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
