"""`kubecontrollers.run(settings)`: the process `tessera kube-controller-manager`, wired.

Builds one informer per kind (all namespaces, raw dicts, indexed by namespace), routes each event
to the keys it concerns, and gives the engine (`loop.py`) one sync function per controller that
reads the caches and calls the controller's pure decision. Serves `/healthz`, `/readyz` (caches
synced) and `/metrics`, and stops cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import datetime
import logging
import os
import random
import threading
import time
import zoneinfo
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

from apis.k8s.workloads import Scale, controller_of
from kube import errors, serving
from kube.client import Client
from kube.delegation import Delegation
from kube.events import EventRecorder
from kube.informer import InformerFactory, raw
from kube.lifecycle import stop_on_signals, wait_until_set, write_atomically
from kubecontrollers import (
    cronjob,
    daemonset,
    deployment,
    disruption,
    garbagecollector,
    job,
    replicaset,
    resourceclaim,
    statefulset,
)
from kubecontrollers.kinds import (
    COLLECTED_OWNER_KINDS,
    CRON_JOBS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    OWNER_KINDS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    STATEFUL_SETS,
)
from kubecontrollers.loop import Engine, Key, Metrics
from kubecontrollers.nodemonitor import NodeMonitor
from kubecontrollers.plan import Obj, Plan
from kubecontrollers.settings import KubeControllersSettings

__all__ = ["run"]

log = logging.getLogger(__name__)

_BY_NAMESPACE = {"namespace": lambda o: [str((o.get("metadata") or {}).get("namespace", ""))]}
#: Dependents by the uids of their owners, for the garbage collector.
_BY_OWNER = {"owner": lambda o: [str(r.get("uid")) for r in (o.get("metadata") or {}).get("ownerReferences") or ()]}
#: The resources whose objects have owners the collector looks after.
_DEPENDENTS = {"pods": PODS, "replicasets": REPLICA_SETS, "jobs": JOBS, "resourceclaims": RESOURCE_CLAIMS}
#: Owner kind -> the controller that syncs it.
_CONTROLLER_OF_KIND = {
    "ReplicaSet": "replicaset",
    "Deployment": "deployment",
    "StatefulSet": "statefulset",
    "Job": "job",
    "DaemonSet": "daemonset",
    "CronJob": "cronjob",
}
_KIND_OF = {r.plural: kind for kind, r in COLLECTED_OWNER_KINDS.items()}
#: Pods by the node they are bound to, for the node lifecycle controller.
_BY_NODE = {"node": lambda o: [str((o.get("spec") or {}).get("nodeName") or "")]}
#: Pods by the claims they use ("namespace/claim") and the templates they name, for the
#: resourceclaim controller: a claim or template that changes wakes the pods it concerns.
_BY_CLAIM = {
    "claim": lambda o: [f"{(o.get('metadata') or {}).get('namespace', '')}/{c}" for c in resourceclaim.claim_names(o)],
    "template": lambda o: [
        f"{(o.get('metadata') or {}).get('namespace', '')}/{c.get('resourceClaimTemplateName')}"
        for c in (o.get("spec") or {}).get("resourceClaims") or ()
        if isinstance(c, dict) and c.get("resourceClaimTemplateName")
    ],
}
#: How many deleted pods' uids are remembered (kube's: 500): a consumer known to be deleted needs
#: no question to the API server.
_DELETED_PODS_KEPT = 500
_RESOURCES = (
    PODS,
    REPLICA_SETS,
    DEPLOYMENTS,
    STATEFUL_SETS,
    JOBS,
    CRON_JOBS,
    POD_DISRUPTION_BUDGETS,
    OWNER_KINDS["DaemonSet"],
    NODES,
    RESOURCE_CLAIMS,
    RESOURCE_CLAIM_TEMPLATES,
)
#: The node lifecycle controller's one key: each pass looks at every node (zones are judged whole).
NODE_LIFECYCLE_KEY: Key = ("nodelifecycle", "")


def local_zone() -> datetime.tzinfo:
    """This process's time zone, which a CronJob without spec.timeZone runs in (as
    kube-controller-manager's): `$TZ`, else /etc/localtime, else UTC."""
    name = os.environ.get("TZ", "").removeprefix(":")
    try:
        if name:
            return zoneinfo.ZoneInfo(name)
        with Path("/etc/localtime").open("rb") as f:
            return zoneinfo.ZoneInfo.from_file(f, key="localtime")
    except (OSError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        return datetime.UTC


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _on_update(route: Callable[[Obj], None]) -> Callable[[Obj, Obj], None]:
    """An update handler that routes both versions: what the old one named (an owner reference
    just removed) needs a look as much as what the new one names."""

    def both(old: Obj, new: Obj) -> None:
        route(new)
        route(old)

    return both


class KubeControllers:
    """The informers, the engine and the controllers' sync functions of one process."""

    def __init__(
        self,
        client: Client,
        settings: KubeControllersSettings,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock`: the wall clock the controllers read (seconds since the epoch); tests move it."""
        self.settings = settings
        self._clock = clock
        self._zone = local_zone()
        self.factory = InformerFactory(client)
        self.informers = {
            r.plural: self.factory.informer(
                r,
                parse=raw,
                indexers={
                    **_BY_NAMESPACE,
                    **(_BY_OWNER if r.plural in _DEPENDENTS else {}),
                    **({**_BY_NODE, **_BY_CLAIM} if r.plural == "pods" else {}),
                },
            )
            for r in _RESOURCES
        }
        syncs = {
            "daemonset": self._sync_daemonset,
            "replicaset": self._sync_replicaset,
            "deployment": self._sync_deployment,
            "statefulset": self._sync_statefulset,
            "job": self._sync_job,
            "cronjob": self._sync_cronjob,
            "disruption": self._sync_disruption,
            "gc": self._sync_dependent,
            "gc-owner": self._sync_owner,
            "nodelifecycle": self._sync_node_lifecycle,
            "resourceclaim-pod": self._sync_claims_of_pod,
            "resourceclaim": self._sync_resource_claim,
        }
        self.nodes = NodeMonitor(
            client, grace_s=settings.node_monitor_grace_period, period_s=settings.node_monitor_period
        )
        self.events = EventRecorder(client, "kube-controller-manager")
        self.engine = Engine(
            client, self.informers, syncs, metrics=metrics, events=self.events, resync_s=settings.resync_period
        )
        self._rng = random.Random()
        self._client = client
        self._deleted_pods: OrderedDict[str, None] = OrderedDict()
        for plural, informer in self.informers.items():
            route = self._router(plural, deleted=False)
            informer.add_handlers(
                on_add=route, on_update=_on_update(route), on_delete=self._router(plural, deleted=True)
            )

    # --- routing events to keys ---------------------------------------------------------------------
    def _router(self, plural: str, *, deleted: bool) -> Callable[[Obj], None]:
        def route(obj: Obj) -> None:
            for key in self.keys_for(plural, obj, deleted=deleted):
                self.engine.add(key)

        return route

    def keys_for(self, plural: str, obj: Obj, *, deleted: bool = False) -> list[Key]:
        """The keys an event on `obj` (of resource `plural`; `deleted`: it is gone) concerns."""
        if plural == "nodes":  # the node lifecycle, and every DaemonSet (a node that came, went or changed)
            return [NODE_LIFECYCLE_KEY, *(("daemonset", _key(d)) for d in self.informers["daemonsets"].store.list())]
        key = _key(obj)
        keys: list[Key] = []
        if plural in _DEPENDENTS:
            keys.append(("gc", f"{plural}|{key}"))
            namespace = key.partition("/")[0]
            keys += [  # an owner waiting for its dependents to go (or let go) looks again
                ("gc-owner", f"{r.get('kind')}|{namespace}/{r.get('name')}")
                for r in (obj.get("metadata") or {}).get("ownerReferences") or ()
                if r.get("kind") in OWNER_KINDS
            ]
        kind = _KIND_OF.get(plural)
        if kind is not None:
            keys.append(("gc-owner", f"{kind}|{key}"))
            if (obj.get("metadata") or {}).get("deletionTimestamp") or deleted:  # its dependents may act now
                keys += self._dependent_keys(str((obj.get("metadata") or {}).get("uid")))
        own = {
            "replicasets": "replicaset",
            "deployments": "deployment",
            "statefulsets": "statefulset",
            "jobs": "job",
            "daemonsets": "daemonset",
            "cronjobs": "cronjob",
        }
        if plural in own:
            keys.append((own[plural], key))
        if plural == "poddisruptionbudgets":
            keys.append(("disruption", key))
        ref = controller_of(obj)
        if ref is not None and ref.get("kind") in _CONTROLLER_OF_KIND:
            namespace = key.partition("/")[0]
            keys.append((_CONTROLLER_OF_KIND[str(ref["kind"])], f"{namespace}/{ref.get('name')}"))
        if plural == "pods":
            namespace = key.partition("/")[0]
            pdbs = self.informers["poddisruptionbudgets"].store.by_index("namespace", namespace)
            keys += [("disruption", _key(b)) for b in pdbs]
            keys += self._claim_keys_of_pod(obj, deleted=deleted)
        if plural == "resourceclaims":
            keys.append(("resourceclaim", key))
            keys += [("resourceclaim-pod", _key(p)) for p in self.informers["pods"].store.by_index("claim", key)]
        if plural == "resourceclaimtemplates":
            keys += [("resourceclaim-pod", _key(p)) for p in self.informers["pods"].store.by_index("template", key)]
        return keys

    def _claim_keys_of_pod(self, pod: Obj, *, deleted: bool) -> list[Key]:
        """The resourceclaim controller's keys for a pod event: the pod (its claims to make) and,
        once it no longer needs them, the claims it holds (their reservations to release)."""
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return []
        meta = pod.get("metadata") or {}
        if deleted:
            self._deleted_pods[str(meta.get("uid"))] = None
            while len(self._deleted_pods) > _DELETED_PODS_KEPT:
                self._deleted_pods.popitem(last=False)
        keys: list[Key] = [] if deleted else [("resourceclaim-pod", _key(pod))]
        if not resourceclaim.pod_needs_claims(pod, deleted=deleted):
            namespace = str(meta.get("namespace", ""))
            keys += [("resourceclaim", f"{namespace}/{name}") for name in resourceclaim.claim_names(pod)]
        return keys

    def all_keys(self) -> Iterable[Key]:
        yield NODE_LIFECYCLE_KEY
        for plural in _DEPENDENTS:
            for obj in self.informers[plural].store.list():
                yield ("gc", f"{plural}|{_key(obj)}")
        for plural, controller in (
            ("replicasets", "replicaset"),
            ("deployments", "deployment"),
            ("statefulsets", "statefulset"),
            ("jobs", "job"),
            ("daemonsets", "daemonset"),
            ("cronjobs", "cronjob"),
            ("poddisruptionbudgets", "disruption"),
            ("resourceclaims", "resourceclaim"),
        ):
            for obj in self.informers[plural].store.list():
                yield (controller, _key(obj))
        for pod in self.informers["pods"].store.list():
            if (pod.get("spec") or {}).get("resourceClaims"):
                yield ("resourceclaim-pod", _key(pod))

    # --- the caches, as the sync functions read them ------------------------------------------------
    def _get(self, plural: str, key: str) -> Obj | None:
        obj: Obj | None = self.informers[plural].store.get(key)
        return obj

    def _in_namespace(self, plural: str, key: str) -> list[Obj]:
        return list(self.informers[plural].store.by_index("namespace", key.partition("/")[0]))

    # --- the controllers ----------------------------------------------------------------------------
    def _sync_replicaset(self, key: str) -> Plan | None:
        rs = self._get("replicasets", key)
        if rs is None:
            return None
        return replicaset.sync_replicaset(rs, self._in_namespace("pods", key), now=self._clock(), rng=self._rng)

    def _sync_deployment(self, key: str) -> Plan | None:
        d = self._get("deployments", key)
        if d is None:
            return None
        return deployment.sync_deployment(d, self._in_namespace("replicasets", key), self._in_namespace("pods", key))

    def _sync_statefulset(self, key: str) -> Plan | None:
        sts = self._get("statefulsets", key)
        if sts is None:
            return None
        return statefulset.sync_statefulset(sts, self._in_namespace("pods", key))

    def _sync_daemonset(self, key: str) -> Plan | None:
        ds = self._get("daemonsets", key)
        if ds is None:
            return None
        nodes = self.informers["nodes"].store.list()
        return daemonset.sync_daemonset(ds, nodes, self._in_namespace("pods", key), rng=self._rng)

    def _sync_job(self, key: str) -> Plan | None:
        j = self._get("jobs", key)
        if j is None:
            return None
        return job.sync_job(
            j,
            self._in_namespace("pods", key),
            now=self._clock(),
            backoff_base_s=self.settings.job_backoff,
            rng=self._rng,
        )

    def _sync_cronjob(self, key: str) -> Plan | None:
        cj = self._get("cronjobs", key)
        if cj is None:
            return None
        now = datetime.datetime.fromtimestamp(self._clock(), datetime.UTC)
        return cronjob.sync_cronjob(cj, self._in_namespace("jobs", key), now=now, local_zone=self._zone)

    def _sync_disruption(self, key: str) -> Plan | None:
        pdb = self._get("poddisruptionbudgets", key)
        if pdb is None:
            return None
        namespace = key.partition("/")[0]

        def scale_of(ref: Obj) -> Scale | None:
            plural = {"ReplicaSet": "replicasets", "Deployment": "deployments", "StatefulSet": "statefulsets"}.get(
                str(ref.get("kind"))
            )
            owner = self._get(plural, f"{namespace}/{ref.get('name')}") if plural else None
            if owner is None or (owner.get("metadata") or {}).get("uid") != ref.get("uid"):
                return None
            parent = controller_of(owner)
            if ref.get("kind") == "ReplicaSet" and parent is not None and parent.get("kind") == "Deployment":
                found = scale_of(parent)
                if found is not None:
                    return found
            return str(ref.get("uid")), int((owner.get("spec") or {}).get("replicas", 0))

        return disruption.sync_budget(pdb, self._in_namespace("pods", key), scale_of)

    def _sync_node_lifecycle(self, _key: str) -> Plan:
        nodes = self.informers["nodes"].store.list()
        pods = self.informers["pods"].store
        names = [str((n.get("metadata") or {}).get("name", "")) for n in nodes]
        return self.nodes.sync(nodes, {name: pods.by_index("node", name) for name in names})

    def _sync_claims_of_pod(self, key: str) -> Plan | None:
        pod = self._get("pods", key)
        if pod is None:
            return None
        claims = {str((c.get("metadata") or {}).get("name")): c for c in self._in_namespace("resourceclaims", key)}
        templates = {
            str((t.get("metadata") or {}).get("name")): t for t in self._in_namespace("resourceclaimtemplates", key)
        }
        return resourceclaim.sync_pod(pod, claims, templates, rng=self._rng)

    def _sync_resource_claim(self, key: str) -> Plan | None:
        claim = self._get("resourceclaims", key)
        if claim is None:
            return None
        namespace = key.partition("/")[0]

        def pod(name: str, uid: str) -> Obj | None:
            """The consumer from the cache; one the cache lacks is asked of the API server unless
            it is known deleted: the scheduler may reserve a claim for a pod not cached yet."""
            cached = self._get("pods", f"{namespace}/{name}")
            if cached is not None or uid in self._deleted_pods:
                return cached
            try:
                found: Obj = self._client.resource(PODS).get(name, namespace=namespace)
            except errors.NotFound:
                return None
            return found

        return resourceclaim.sync_claim(claim, pod)

    def _owner(self, kind: str, key: str) -> Obj | None:
        resource = COLLECTED_OWNER_KINDS.get(kind)
        return self._get(resource.plural, key) if resource is not None else None

    def _dependent_keys(self, uid: str) -> list[Key]:
        return [
            ("gc", f"{plural}|{_key(d)}")
            for plural in _DEPENDENTS
            for d in self.informers[plural].store.by_index("owner", uid)
        ]

    def _sync_dependent(self, key: str) -> Plan | None:
        plural, _, name = key.partition("|")
        dependent = self._get(plural, name)
        if dependent is None:
            return None
        return garbagecollector.collect_dependent(_DEPENDENTS[plural], dependent, self._owner)

    def _sync_owner(self, key: str) -> Plan | None:
        kind, _, name = key.partition("|")
        owner = self._owner(kind, name)
        if owner is None:
            return None
        uid = str((owner.get("metadata") or {}).get("uid"))
        dependents = [
            (resource, d)
            for plural, resource in _DEPENDENTS.items()
            for d in self.informers[plural].store.by_index("owner", uid)
        ]
        return garbagecollector.collect_owner(kind, owner, dependents, self._owner)

    # --- lifecycle ----------------------------------------------------------------------------------
    def run(self, stop: threading.Event, synced: threading.Event) -> None:
        """Start the informers, set `synced` once their caches are, and sync until `stop` is set."""
        self.factory.start()
        try:
            while not self.factory.wait_for_sync(timeout=0.5):
                if stop.is_set():
                    return
            synced.set()
            log.info("Informer caches synced", extra={"resources": ",".join(self.informers)})
            self.engine.start(self.all_keys)
            wait_until_set(stop)
        finally:
            self.engine.stop()
            self.factory.stop()
            self.events.close()


def run(settings: KubeControllersSettings, *, stop: threading.Event | None = None) -> int:
    """Run until `stop` is set (None: until SIGTERM/SIGINT). Returns 0; ConfigError for bad settings."""
    settings.validate()
    metrics = Metrics()
    synced = threading.Event()
    with Client.from_settings(settings.client) as client:
        controllers = KubeControllers(client, settings, metrics)
        http = serving.Server(
            "kube-controller-manager HTTP",
            host=settings.serving.host,
            port=settings.serving.port,
            registry=metrics.registry,
            liveness={"worker": lambda: "" if not synced.is_set() or controllers.engine.alive() else "worker died"},
            readiness={"informer-sync": lambda: "" if synced.is_set() else "the informer caches have not synced yet"},
            auth=Delegation(client),
            tls=settings.serving.tls.context(),
        )
        http.start()
        try:
            if settings.serving.address_file is not None:
                write_atomically(settings.serving.address_file, http.address + "\n")
            log.info(
                "Starting the workload controllers (embedded kube-controller-manager)",
                extra={
                    "server": client.host,
                    "controllers": ",".join(controllers.engine.controllers),
                },
            )
            if stop is not None:
                controllers.run(stop, synced)
            else:
                with stop_on_signals() as signalled:
                    controllers.run(signalled, synced)
        finally:
            http.stop()
    return 0
