"""Chaos: `kill -9` of a random component at random moments, and GPU faults with recoveries.

`Killer` picks, from a seeded RNG, a kind among those the cluster runs (API server, scheduler,
controller, kube-controller-manager, dashboard, descheduler, an agent, the runtime proxy — which `tessera up`
runs only where it is given one, so the soak, on simulated nodes, has none: `runtime_proxy_note`)
and then one process of that kind that runs, and sends it SIGKILL through its pid: no chance to clean up, as in
an OOM kill or a node crash. The supervisor (cli/localcluster/supervisor.py) restarts it; its
STARTED event marks the kill survived. One kill at a time: the next waits until the last victim is
back, so every kill is a separate disturbance, and the gaps (uniform in [0.5, 1.5] × the interval)
start from there.

`NodeLoss` makes a node die for a while: its agent (the node's kubelet too, simulated) is frozen
with SIGSTOP — no heartbeat, no answer, as a machine that lost power. The node lifecycle
controller (kubecontrollers/nodelifecycle.py) notices the silent Lease, marks the node Unknown,
taints it unreachable and evicts its pods once they stop tolerating it; in every other loss
(seeded) the Node is also deleted after that, `delete_after_s` into the loss, as an operator or a
cloud controller removes a dead machine. `down_s` after the freeze the agent gets SIGCONT: it
reports its Node Ready again, or finds it gone and registers it again (agent/kubeletsim/node.py),
as the machine rebooting into the cluster; the controller clears the taints.

`GPUFaults` injects an XID 79 (fallen off the bus: unhealthy until reset) into a random GPU of a
random simulated node over the agent's fault routes (agent/devices/faults.py), and resets it
`fault_duration_s` later; a request to an agent that is down is retried on the next tick.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from cli.localcluster.components import Component
from cli.localcluster.supervisor import EventKind, SupervisorEvent
from kube import errors
from kube.process import ServingProcess

__all__ = ["KINDS", "GPUFaults", "Kill", "Killer", "NodeLoss", "kind_of", "runtime_proxy_note"]

log = logging.getLogger(__name__)

#: The kinds of component a kill picks from, alike.
#: A kind ending in "/" is a prefix (one per node); the others are whole names (`kind_of`).
KINDS: Final = (
    "apiserver",
    "scheduler",
    "controller",
    "kube-controller-manager",
    "dashboard",
    "descheduler",
    "agent/",
    "runtime-proxy",
)
_TICK_S: Final = 0.5
_XID_FALLEN_OFF_THE_BUS: Final = 79


def kind_of(component: str) -> str | None:
    """The kind in `KINDS` a component's name belongs to: its name, or for agents its prefix."""
    for kind in KINDS:
        if component == kind or (kind.endswith("/") and component.startswith(kind)):
            return kind
    return None


def runtime_proxy_note(components: Sequence[Component]) -> str:
    """Whether the runtime proxy is among the kills, and why not when it is not."""
    if any(kind_of(c.name) == "runtime-proxy" for c in components):
        return "the runtime proxy is among the components killed"
    return (
        "the runtime proxy is not killed: this cluster runs none (simulated nodes start no containers; "
        "a runtime proxy needs containerd and root, docs/runtime-proxy.md)"
    )


@dataclass(slots=True)
class Kill:
    component: str
    pid: int
    at: float
    #: When the supervisor reported it started again (None: not yet).
    back_at: float | None = None


class Killer:
    """See the module docstring. `on_event` is the LocalCluster's supervisor callback."""

    def __init__(self, components: Callable[[], Sequence[Component]], *, interval_s: float, seed: int) -> None:
        #: The cluster's components, read at each kill (a LocalCluster knows them once started).
        self._components = components
        self._interval = interval_s
        self._rng = random.Random(f"chaos-{seed}")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.kills: list[Kill] = []

    def on_event(self, event: SupervisorEvent) -> None:
        if event.kind is not EventKind.STARTED or not event.restarts:
            return
        with self._lock:
            for kill in reversed(self.kills):
                if kill.component == event.name and kill.back_at is None:
                    kill.back_at = time.time()
                    break

    def outstanding(self) -> list[Kill]:
        with self._lock:
            return [k for k in self.kills if k.back_at is None]

    def calm_since(self) -> float:
        """The last disturbance: now while a victim is down, else the last one's return."""
        with self._lock:
            if any(k.back_at is None for k in self.kills):
                return time.time()
            return max((k.back_at for k in self.kills if k.back_at is not None), default=0.0)

    def run(self) -> None:
        while not self._stop.is_set():
            while self.outstanding():  # one victim at a time; the gap starts once it is back
                if self._stop.wait(_TICK_S):
                    return
            if self._stop.wait(self._rng.uniform(0.5, 1.5) * self._interval):
                return
            self.kill_one()

    def stop(self) -> None:
        self._stop.set()

    def kill_one(self) -> Kill | None:
        """SIGKILL one running component of a random kind; None when none of that kind runs."""
        components = self._components()
        present = [k for k in KINDS if any(kind_of(c.name) == k for c in components)]
        if not present:
            return None
        kind = self._rng.choice(present)
        running = [c for c in components if kind_of(c.name) == kind and c.process.pid and c.process.running]
        if not running:
            return None
        victim = self._rng.choice(running)
        pid = victim.process.pid
        assert pid is not None
        kill = Kill(victim.name, pid, time.time())
        with self._lock:
            self.kills.append(kill)
        log.info("Killing a component", extra={"component": victim.name, "pid": pid})
        with contextlib.suppress(ProcessLookupError):  # it died on its own: it is restarted all the same
            os.kill(pid, signal.SIGKILL)
        return kill


@dataclass(slots=True)
class _Fault:
    component: Component
    minor: int
    recover_at: float


class GPUFaults:
    """See the module docstring."""

    def __init__(
        self, agents: Sequence[Component], *, gpus_per_node: int, interval_s: float, duration_s: float, seed: int
    ) -> None:
        self._agents = list(agents)
        self._gpus = gpus_per_node
        self._interval = interval_s
        self._duration = duration_s
        self._rng = random.Random(f"faults-{seed}")
        self._stop = threading.Event()
        self._faulted: list[_Fault] = []
        self.injected = 0
        self.recovered = 0

    def run(self) -> None:
        next_fault = time.time() + self._rng.uniform(0.5, 1.5) * self._interval
        while not self._stop.wait(_TICK_S):
            self._recover(time.time())
            if time.time() >= next_fault:
                self._inject()
                next_fault = time.time() + self._rng.uniform(0.5, 1.5) * self._interval

    def stop(self) -> None:
        self._stop.set()

    def recover_all(self, timeout_s: float) -> None:
        """Reset every faulted GPU (the soak ends with all GPUs healthy), retrying until `timeout_s`."""
        deadline = time.time() + timeout_s
        while self._faulted and time.time() < deadline:
            self._recover(float("inf"))
            if self._faulted:
                time.sleep(_TICK_S)

    def _inject(self) -> None:
        agent = self._rng.choice(self._agents)
        taken = {f.minor for f in self._faulted if f.component is agent}
        free = [minor for minor in range(self._gpus) if minor not in taken]
        if not free:
            return
        minor = self._rng.choice(free)
        if self._post(agent, f"xid?minor={minor}&xid={_XID_FALLEN_OFF_THE_BUS}"):
            self.injected += 1
            self._faulted.append(_Fault(agent, minor, time.time() + self._duration))

    def _recover(self, now: float) -> None:
        for fault in [f for f in self._faulted if f.recover_at <= now]:
            if self._post(fault.component, f"gpu-reset?minor={fault.minor}"):
                self.recovered += 1
                self._faulted.remove(fault)

    @staticmethod
    def _post(agent: Component, route: str) -> bool:
        if not isinstance(agent.process, ServingProcess):
            return False
        try:
            status, _ = agent.process.request("POST", f"/debug/simulate/{route}", timeout=5)
        except OSError as e:  # down (killed, restarting): try again later
            log.info("Fault request got no answer", extra={"component": agent.name, "route": route, "error": str(e)})
            return False
        if status != 200:
            log.warning("Fault request refused", extra={"component": agent.name, "route": route, "status": status})
        return status == 200


@dataclass(slots=True)
class Loss:
    node: str
    pid: int
    at: float
    #: When the agent was let go on (None: not yet).
    back_at: float | None = None
    #: Whether its Node was deleted while it was lost.
    deleted: bool = False


class NodeLoss:
    """See the module docstring. `delete_node(name)` deletes the Node (raises when it cannot);
    `delete_after_s` None: never."""

    def __init__(
        self,
        agents: Sequence[Component],
        delete_node: Callable[[str], object],
        *,
        interval_s: float,
        down_s: float,
        seed: int,
        delete_after_s: float | None = None,
    ) -> None:
        self._agents = list(agents)
        self._delete_node = delete_node
        self._interval = interval_s
        self._down = down_s
        self._delete_after = delete_after_s
        self._rng = random.Random(f"node-loss-{seed}")
        self._stop = threading.Event()
        self.losses: list[Loss] = []

    def run(self) -> None:
        while not self._stop.wait(self._rng.uniform(0.5, 1.5) * self._interval):
            delete = self._delete_after is not None and self._delete_after < self._down and self._rng.random() < 0.5
            loss = self.lose_one()
            if loss is None:
                continue
            waited = 0.0
            if delete and self._delete_after is not None:
                if self._stop.wait(self._delete_after):
                    self.bring_back(loss)
                    return
                self.delete(loss)
                waited = self._delete_after
            self._stop.wait(self._down - waited)
            self.bring_back(loss)

    def stop(self) -> None:
        self._stop.set()

    def calm_since(self) -> float:
        """The last disturbance: now while a node is lost, else the last one's return."""
        if any(loss.back_at is None for loss in self.losses):
            return time.time()
        return max((loss.back_at for loss in self.losses if loss.back_at is not None), default=0.0)

    def lose_one(self) -> Loss | None:
        running = [a for a in self._agents if a.process.pid and a.process.running]
        if not running:
            return None
        victim = self._rng.choice(running)
        pid = victim.process.pid
        assert pid is not None
        loss = Loss(victim.node, pid, time.time())
        self.losses.append(loss)
        log.info("Losing a node", extra={"node": victim.node, "pid": pid})
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        return loss

    def delete(self, loss: Loss) -> None:
        """Delete the lost node's Node, as an operator removes a dead machine."""
        try:
            self._delete_node(loss.node)
        except (errors.APIError, OSError) as e:  # the API server is being restarted: left as it is
            log.info("Deleting the lost node failed", extra={"node": loss.node, "error": str(e)})
            return
        loss.deleted = True
        log.info("Deleted the lost node", extra={"node": loss.node})

    def bring_back(self, loss: Loss) -> None:
        """SIGCONT its agent (a killed one was restarted by its supervisor: nothing to do)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(loss.pid, signal.SIGCONT)
        loss.back_at = time.time()
        log.info("Node back", extra={"node": loss.node, "pid": loss.pid})

    def bring_all_back(self) -> None:
        for loss in self.losses:
            if loss.back_at is None:
                self.bring_back(loss)
