"""A simulated kubelet, for nodes that have no real one (`tessera agent --simulate-kubelet`).

`tessera up` runs several agents with simulated devices on one machine; no kubelet runs for their
nodes, so the agent plays the part a kubelet plays for the control plane, and nothing more: it
registers the Node and keeps it Ready (`node.py`), marks pods bound to it Running and removes
pods being deleted (`pods.py`), and prepares and unprepares their ResourceClaims through the DRA
plugins registered in its plugins_registry directory, as kubelet's DRA manager does
(`claims.py`, `draclient.py`). No container is started. Everything it writes is marked as
simulated (a Node label, the kubelet version, the Ready message) and its logs say SIMULATED.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from agent.discovery.simulated import NodeCapacity
from agent.kubeletsim.claims import DRAManager, PrepareFailed
from agent.kubeletsim.node import NodeHeartbeat, fake_ip
from agent.kubeletsim.pods import PodLifecycle
from apis.errors import ConfigError
from apis.k8s.core import Pod, Taint
from kube.client import Client
from kube.events import EventRecorder
from kube.informer import Informer

__all__ = ["KUBELET_COMPONENT", "NodeHeartbeat", "PodLifecycle", "SimulatedKubelet"]

log = logging.getLogger(__name__)

#: Made-up address ranges: node InternalIPs and pod IPs (stable, derived from names and uids).
NODE_IP_PREFIX = "10.250"
POD_IP_PREFIX = "10.244"
#: The source component of its Events, as kubelet's.
KUBELET_COMPONENT = "kubelet"


class SimulatedKubelet:
    """The Node heartbeat and the pod lifecycle of one simulated node, started and stopped together."""

    def __init__(
        self,
        client: Client,
        pods: Informer[Pod],
        *,
        node_name: str,
        capacity: NodeCapacity,
        node_ip: str = "",
        lease_renew_s: float = 10.0,
        status_report_s: float = 60.0,
        on_registered: Callable[[], None] | None = None,
        taints: Sequence[Taint] = (),
        labels: Mapping[str, str] | None = None,
        dra: DRAManager | None = None,
    ) -> None:
        """`dra`: prepare pods' ResourceClaims (its checkpoint is loaded at `start()`)."""
        ip = node_ip or fake_ip(NODE_IP_PREFIX, node_name)
        self.node = NodeHeartbeat(
            client,
            node_name=node_name,
            capacity=capacity,
            node_ip=ip,
            lease_renew_s=lease_renew_s,
            status_report_s=status_report_s,
            on_registered=on_registered,
            taints=taints,
            labels=labels,
        )
        self.dra = dra
        self.events = EventRecorder(client, KUBELET_COMPONENT, host=node_name)
        self.pods = PodLifecycle(
            client,
            pods,
            node_name=node_name,
            host_ip=ip,
            pod_ip=lambda uid: fake_ip(POD_IP_PREFIX, uid),
            dra=dra,
            events=self.events,
        )

    def start(self) -> None:
        """Raises ConfigError when the DRA checkpoint cannot be read."""
        if self.dra is not None:
            try:
                self.dra.start()
            except PrepareFailed as e:
                raise ConfigError(str(e)) from e
        log.warning(
            "Starting a SIMULATED kubelet: this agent registers its Node and reports pods Running without running them",
            extra={"node": self.node.node_name, "ip": self.node.node_ip},
        )
        self.node.step()  # register now, so the Device CR's first write can name its owner
        self.node.start()
        self.pods.start()

    def stop(self) -> None:
        self.pods.stop()
        self.node.stop()
        self.events.close()
