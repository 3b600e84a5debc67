"""The QoS runtime-hook plugin: cgroup resources for pods and containers as they are created.

Runs inside the hook server (`agent.hooks`), on the path of kubelet's RunPodSandbox,
CreateContainer and UpdateContainerResources through the runtime proxy. It looks the pod up by
UID (`PodLookup`, the agent's informer cache), plans it with `agent.qos.policy` — the same plan
the reconciler enforces — and writes it into the response's `LinuxContainerResources`:

- `cpu_shares`, `cpu_period`/`cpu_quota`, `memory_limit_in_bytes` (BE pods: from batch-cpu and
  batch-memory, which kubelet does not translate);
- on cgroup v2 only, `unified` `memory.min`/`memory.low`/`memory.high` when the class's memory
  QoS is enabled (runc rejects `unified` on v1; there the reconciler writes what the kernel has).

The response starts from what an earlier plugin wrote, else from the request, so plugins
compose. A pod the lookup does not know yet is left as kubelet asked (logged at V4): the
reconciler applies QoS within one interval. An unlimited value is sent as 0 ("not set", as
kubelet does) unless the request carried a limit, then as -1 so the limit is really lifted.
On cgroup v1 a CFS quota is capped at the nearest limited ancestor's (BE suppression may have
lowered the BestEffort cgroup), or runc would fail the container with EINVAL; this reads one or
two small cgroup files, the only I/O on this path.

Wiring: `hook_server.register(QoSHookPlugin(config=qos_config, pods=informer.pod_by_uid,
cgroups=kube_cgroups))`.
"""

from __future__ import annotations

import logging

from agent.hooks.plugin import HookPlugin
from agent.qos import convert, enforce
from agent.qos.cgroups import Cgroup, CgroupError
from agent.qos.config import QoSConfig
from agent.qos.knobs import CgroupVersion, CPUMax
from agent.qos.layout import KubeCgroups
from agent.qos.pods import PodLookup
from agent.qos.policy import CgroupSettings, PodPlan, plan
from kube.logs import V
from proto.runtime.v1alpha1 import api_pb2

__all__ = ["QoSHookPlugin"]

log = logging.getLogger(__name__)


class QoSHookPlugin(HookPlugin):
    """Sets cgroup resources from the pod's QoS class; see the module docstring."""

    name = "qos"

    def __init__(self, *, config: QoSConfig, pods: PodLookup, cgroups: KubeCgroups) -> None:
        self._config = config
        self._pods = pods
        self._cgroups = cgroups

    def set_config(self, config: QoSConfig) -> None:
        """Use a new NodeSLO for the next requests."""
        self._config = config

    def pre_run_pod_sandbox(
        self, request: api_pb2.PodSandboxHookRequest, response: api_pb2.PodSandboxHookResponse
    ) -> None:
        pod_plan = self._plan(request.pod_meta)
        if pod_plan is None:
            return
        resources = _start_from(response.resources if response.HasField("resources") else request.resources)
        parent = self._cgroups.qos_dir(pod_plan.kube_qos)
        self._fill(
            resources, pod_plan.pod, parent=parent, base=request.resources, memory_qos=self._memory_qos(pod_plan)
        )
        response.resources.CopyFrom(resources)

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        self._container(request, response)

    def pre_update_container_resources(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        self._container(request, response)

    def _container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        pod_plan = self._plan(request.pod_meta)
        if pod_plan is None:
            return
        settings = pod_plan.containers.get(request.container_meta.name)
        if settings is None:
            log.log(
                V(4),
                "Container not in pod spec; QoS leaves it",
                extra={"pod": pod_plan.pod_key, "container": request.container_meta.name},
            )
            return
        has_response = response.HasField("container_resources")
        resources = _start_from(response.container_resources if has_response else request.container_resources)
        parent = self._cgroups.find_pod(pod_plan.uid, pod_plan.kube_qos)
        self._fill(
            resources, settings, parent=parent, base=request.container_resources, memory_qos=self._memory_qos(pod_plan)
        )
        response.container_resources.CopyFrom(resources)

    def _plan(self, meta: api_pb2.PodSandboxMetadata) -> PodPlan | None:
        pod = self._pods(meta.uid)
        if pod is None:
            log.log(
                V(4),
                "Pod not in the agent's cache; the reconciler will apply QoS",
                extra={"pod": f"{meta.namespace}/{meta.name}", "uid": meta.uid},
            )
            return None
        pod_plan = plan(pod, self._config.resource_qos)
        for problem in pod_plan.problems:
            log.warning("Pod has invalid QoS input", extra={"pod": pod.key, "problem": problem})
        return pod_plan

    def _fill(
        self,
        resources: api_pb2.LinuxContainerResources,
        settings: CgroupSettings,
        *,
        parent: Cgroup | None,
        base: api_pb2.LinuxContainerResources,
        memory_qos: bool,
    ) -> None:
        if settings.cpu_shares is not None:
            resources.cpu_shares = settings.cpu_shares
        if settings.cpu_max is not None:
            limit = self._capped(settings.cpu_max, parent)
            resources.cpu_period = limit.period
            resources.cpu_quota = _unset_or_lift(limit.quota, base.cpu_quota)
        if settings.memory_max is not None:
            resources.memory_limit_in_bytes = _unset_or_lift(settings.memory_max, base.memory_limit_in_bytes)
        if memory_qos and self._cgroups.hierarchy.version is CgroupVersion.V2:
            for key, value in (
                ("memory.min", settings.memory_min),
                ("memory.low", settings.memory_low),
                ("memory.high", settings.memory_high),
            ):
                if value is not None:
                    resources.unified[key] = "max" if value == convert.UNLIMITED else str(value)

    def _memory_qos(self, pod_plan: PodPlan) -> bool:
        return self._config.resource_qos.for_class(pod_plan.qos).memory.enable

    def _capped(self, wanted: CPUMax, parent: Cgroup | None) -> CPUMax:
        if parent is None:
            return wanted
        try:
            return enforce.Enforcer().cap_under(parent, wanted)
        except CgroupError as e:  # the parent vanished or is unreadable: send what policy says
            log.log(V(4), "Cannot read the parent's CPU limit", extra={"cgroup": str(parent), "error": str(e)})
            return wanted


def _start_from(source: api_pb2.LinuxContainerResources) -> api_pb2.LinuxContainerResources:
    resources = api_pb2.LinuxContainerResources()
    resources.CopyFrom(source)
    return resources


def _unset_or_lift(value: int, requested: int) -> int:
    """An UNLIMITED value as CRI expects it: 0 ("not set") unless a limit was asked, then -1."""
    if value != convert.UNLIMITED:
        return value
    return -1 if requested > 0 else 0
