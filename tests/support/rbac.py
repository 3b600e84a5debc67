"""The calls each component makes of the API server, with the code that makes them: the table
that deploy/'s Roles are checked against, both ways, by the evaluator in
tests/unit/deploy/test_rbac.py and by the real API server's authorizer in
tests/integration/apiserver/test_rbac.py.

`NEEDED` lists every (verb, API group, resource, namespace, name) a deployed component calls;
`NEEDED_LOCALLY` what only `tessera up` runs (granted by `identities.LOCAL_ROLES`). A component
that starts calling something new fails those tests until its row and its Role are added together.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis import dra
from apis.extension import names
from tests.support.manifests import NAMESPACE

__all__ = ["ALL", "ANY", "CORE", "DEVICES", "LEASES", "NEEDED", "NEEDED_LOCALLY", "NON_RESOURCE", "Call", "calls"]

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
        # status.allocation and reservedFor written at PreBind (patch resourceclaims/status); the
        # claim for a pod's extended resources created at PreBind, deleted when the binding fails
        # (scheduler/service/objectapi.py).
        | calls("list watch", dra.GROUP, dra.DEVICE_CLASSES.plural)
        | calls("list watch", dra.GROUP, dra.RESOURCE_SLICES.plural)
        | calls("get list watch create patch delete", dra.GROUP, dra.RESOURCE_CLAIMS.plural)
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
        # agent/devices/slicewriter.py SliceWriter (--dra): list its node's ResourceSlices per driver,
        # create, update (PUT) and delete them as kube's resourceslice controller does.
        | calls("list create update delete", dra.GROUP, dra.RESOURCE_SLICES.plural)
        # agent/dra/driver.py DRADriver (--dra-plugin): at NodePrepareResources, get the claim kubelet
        # names (its allocation) and list its node's ResourceSlices (the list above) for the GPUs.
        | calls("get", dra.GROUP, dra.RESOURCE_CLAIMS.plural)
        # agent/hooks/collision.py DeviceCollisionPlugin, through kube/events.py EventRecorder: a
        # DeviceCollision Warning on a refused pod, in its namespace (create, then patch a repeat's count);
        # agent/qos/nodeslo.py: FailedParsing on a NodeSLO, a cluster-scoped object, so in `default`.
        | calls("create patch", CORE, "events")
        | delegated_auth()
    ),
    "tessera-dashboard": (
        # dashboard/sources.py ClusterSources: Informers (list + watch, every namespace) of the
        # Devices, pods, PodGroups (both groups), ElasticQuotas, Reservations, PodMigrationJobs,
        # ResourceClaims and ResourceSlices it draws.
        calls("list watch", *DEVICES)
        | calls("list watch", CORE, "pods")
        | calls("list watch", names.POD_GROUPS.group, names.POD_GROUPS.plural)
        | calls("list watch", names.UPSTREAM_POD_GROUPS.group, names.UPSTREAM_POD_GROUPS.plural)
        | calls("list watch", names.ELASTIC_QUOTAS.group, names.ELASTIC_QUOTAS.plural)
        | calls("list watch", names.RESERVATIONS.group, names.RESERVATIONS.plural)
        | calls("list watch", names.POD_MIGRATION_JOBS.group, names.POD_MIGRATION_JOBS.plural)
        | calls("list watch", dra.GROUP, dra.RESOURCE_CLAIMS.plural)
        | calls("list watch", dra.GROUP, dra.RESOURCE_SLICES.plural)
        # dashboard/sources.py SchedulerPoller: the scheduler's /metrics, which it authorizes
        # through the API server (kube/delegation.py).
        | calls("get", NON_RESOURCE, "/metrics")
    ),
}


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
