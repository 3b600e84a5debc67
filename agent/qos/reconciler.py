"""The QoS reconciler: every N seconds, bring every pod's cgroups in line with the policy.

The hook plugin applies QoS when containers are created, but only on nodes that run the runtime
proxy, and only at creation. The reconciler covers the rest — nodes without the proxy, pods
that existed before the agent, NodeSLO changes, relabelled pods — by reading the node's pods
from a `PodSource`, planning each with `agent.qos.policy` and writing the difference with
`agent.qos.enforce`. It also sets the BestEffort QoS cgroup's cpu.idle when BE schedIdle is on.

Wiring (the agent process):

    reconciler = Reconciler(cgroups=KubeCgroups.detect(Hierarchy.detect()),
                            pods=lambda: informer.pods_on_node(),   # any PodSource
                            config=qos_config, interval_s=10.0, registry=registry)
    reconciler.start()   # a daemon thread (agent.periodic); reconciler.stop() at shutdown

One pod's failure (a vanished cgroup, a malformed container id, a kernel refusal) is logged and
counted, and the pass goes on with the next pod.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

from agent.periodic import Periodic
from agent.qos import enforce, policy
from agent.qos.cgroups import Cgroup, CgroupError, CgroupNotFound, Change
from agent.qos.config import QoSConfig
from agent.qos.layout import KubeCgroups, parse_container_id
from agent.qos.pods import PodSource
from agent.qos.policy import CgroupSettings
from apis.errors import ValidationError
from apis.extension.qos import KubeQoSClass
from apis.k8s.core import Pod
from kube.logs import V

__all__ = ["ReconcileReport", "Reconciler"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ReconcileReport:
    """The outcome of one pass, for logs, tests and the benchmark."""

    pods: int = 0
    applied: int = 0
    #: pods without a cgroup yet (being created) or any more (being deleted)
    missing: int = 0
    changes: list[Change] = field(default_factory=list)
    #: pod key → why it could not be brought in line
    errors: dict[str, str] = field(default_factory=dict)


class Reconciler:
    """Applies the QoS policy to existing pod and container cgroups; see the module docstring.

    `reconcile_once()` is one pass (tests call it directly); `start()`/`stop()` run passes in a
    thread. `set_config` may be called from any thread.
    """

    def __init__(
        self,
        *,
        cgroups: KubeCgroups,
        pods: PodSource,
        config: QoSConfig,
        interval_s: float = 10.0,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._cgroups = cgroups
        self._pods = pods
        self._config = config
        self._interval_s = interval_s
        #: (pod uid, message) pairs already logged as warnings: a problem that persists across
        #: passes is warned about once, then repeated only at V4.
        self._told: set[tuple[str, str]] = set()
        self._loop = Periodic("qos-reconciler", self._pass, interval_s)
        self._duration = Histogram(
            "tessera_agent_qos_reconcile_duration_seconds",
            "Wall time of one QoS reconcile pass over every pod on the node",
            registry=registry,
        )
        self._writes = Counter(
            "tessera_agent_qos_cgroup_writes_total", "cgroup values changed by the QoS reconciler", registry=registry
        )
        self._errors = Counter(
            "tessera_agent_qos_reconcile_errors_total",
            "pods the QoS reconciler could not bring in line (see the logs for why)",
            registry=registry,
        )

    def set_config(self, config: QoSConfig) -> None:
        """Use a new NodeSLO from the next pass on."""
        self._config = config

    def start(self) -> None:
        """Reconcile now and then every `interval_s` seconds, in a daemon thread, until `stop()`."""
        log.info(
            "Starting QoS reconciler", extra={"interval_s": self._interval_s, "driver": self._cgroups.driver.value}
        )
        self._loop.start()

    def stop(self) -> None:
        """Stop the thread after the current pass. Idempotent."""
        self._loop.stop()

    def _pass(self) -> None:
        self.reconcile_once()

    def reconcile_once(self) -> ReconcileReport:
        """One pass over the node's pods. Never raises for a single pod's problem."""
        started = time.perf_counter()
        config = self._config
        report = ReconcileReport()
        enforcer = enforce.Enforcer(lacking=enforce.lacking(self._cgroups.kubepods()))
        self._reconcile_be_root(config, enforcer, report)
        seen: set[str] = set()
        for pod in self._pods():
            if pod.is_terminal:
                continue
            report.pods += 1
            seen.add(pod.uid)
            try:
                self._reconcile_pod(pod, config, enforcer, report)
            except (CgroupError, ValidationError) as e:
                report.errors[pod.key] = str(e)
                self._warn_once(pod, "Cannot apply QoS to pod", str(e))
            except Exception as e:  # one pod's bug must not stop the pass
                report.errors[pod.key] = f"internal error: {e!r}"
                log.exception("Unexpected error applying QoS to pod", extra={"pod": pod.key})
        self._told = {told for told in self._told if told[0] in seen}
        self._writes.inc(len(report.changes))
        self._errors.inc(len(report.errors))
        self._duration.observe(time.perf_counter() - started)
        log.log(
            V(4),
            "QoS reconcile pass done",
            extra={"pods": report.pods, "changes": len(report.changes), "errors": len(report.errors)},
        )
        return report

    def _reconcile_pod(self, pod: Pod, config: QoSConfig, enforcer: enforce.Enforcer, report: ReconcileReport) -> None:
        plan = policy.plan(pod, config.resource_qos)
        for problem in plan.problems:
            self._warn_once(pod, "Pod has invalid QoS input", problem)
        pod_cg = self._cgroups.find_pod(pod.uid, plan.kube_qos)
        if pod_cg is None:
            report.missing += 1
            log.log(V(5), "Pod has no cgroup yet", extra={"pod": pod.key})
            return
        entries: list[tuple[Cgroup, CgroupSettings]] = [(pod_cg, plan.pod)]
        for name, settings in plan.containers.items():
            raw_id = pod.container_ids.get(name)
            if not raw_id:
                continue
            container_cg = self._cgroups.find_container(pod_cg, parse_container_id(raw_id, obj=f"pod {pod.key}"))
            if container_cg is not None:
                entries.append((container_cg, settings))
        try:
            applied = enforcer.apply_tree(entries)
        except CgroupNotFound:
            report.missing += 1  # deleted while we wrote: the next pass will not see it
            log.log(V(4), "Pod cgroup vanished during reconcile", extra={"pod": pod.key})
            return
        report.applied += 1
        report.changes += applied.changes
        if applied.changes:
            log.log(
                V(2),
                "Applied QoS to pod",
                extra={"pod": pod.key, "qos": plan.qos.value, "changes": len(applied.changes)},
            )
        for change in applied.changes:
            log.log(
                V(4),
                "Changed cgroup value",
                extra={
                    "pod": pod.key,
                    "cgroup": change.cgroup,
                    "knob": change.knob,
                    "old": change.old,
                    "new": change.new,
                },
            )

    def _warn_once(self, pod: Pod, message: str, detail: str) -> None:
        told = (pod.uid, detail)
        log.log(V(4) if told in self._told else logging.WARNING, message, extra={"pod": pod.key, "error": detail})
        self._told.add(told)

    def _reconcile_be_root(self, config: QoSConfig, enforcer: enforce.Enforcer, report: ReconcileReport) -> None:
        """cpu.idle on the BestEffort QoS cgroup follows BE's schedIdle (Koordinator's BECPUIdle)."""
        be = config.resource_qos.be.cpu
        root = self._cgroups.qos_dir(KubeQoSClass.BEST_EFFORT)
        try:
            report.changes += enforcer.apply(root, CgroupSettings(cpu_idle=be.enable and be.sched_idle == 1)).changes
        except CgroupNotFound:
            log.log(V(4), "No BestEffort QoS cgroup yet", extra={"cgroup": str(root)})
        except CgroupError as e:
            report.errors[str(root)] = str(e)
            log.warning("Cannot set cpu.idle on the BestEffort cgroup", extra={"error": str(e)})
