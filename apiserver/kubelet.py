"""The answers to what kube-apiserver would proxy to a kubelet: pods/log, exec, attach, portforward.

kube-apiserver resolves the pod, its container and its node, then connects to that node's kubelet.
Tessera's API server has no kubelet to connect to: every node of `tessera up` is served by the
agent's simulated kubelet (`agent/kubeletsim`, which labels its Node
`tessera.dev/simulated-kubelet=true`), and no container runs there. So the request is checked as
kube checks it (404 for a missing pod or node, 400 for a wrong container or an unscheduled pod)
and then answered as kube-apiserver answers when it cannot reach a kubelet: a 500 Status without
a reason, which kubectl prints as `Error from server: <message>`. The message names the node and
says that it is simulated, so `kubectl logs` and `kubectl exec` explain themselves instead of
answering a bare 404. Pure functions: `handlers.py` reads the objects and sends the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.extension import names
from apiserver.errors import StatusError

__all__ = ["METHODS", "Target", "check_upgrade", "target", "unreachable"]

#: The subresources a kubelet serves, and the methods kube-apiserver accepts for each.
METHODS: Final[Mapping[str, frozenset[str]]] = {
    "log": frozenset({"GET"}),
    "exec": frozenset({"GET", "POST"}),
    "attach": frozenset({"GET", "POST"}),
    "portforward": frozenset({"GET", "POST"}),
}
_ACTIONS: Final = {
    "log": ("cannot get logs of", "there are no logs"),
    "exec": ("cannot exec into", "there is nothing to exec into"),
    "attach": ("cannot attach to", "there is nothing to attach to"),
    "portforward": ("cannot forward ports of", "nothing listens on its ports"),
}


@dataclass(frozen=True, slots=True)
class Target:
    """What a request addresses: `node` is "" for a pod that is not scheduled yet."""

    subresource: str
    namespace: str
    pod: str
    container: str
    node: str

    @property
    def what(self) -> str:
        action, _ = _ACTIONS[self.subresource]
        pod = f'pod "{self.namespace}/{self.pod}"'
        return f'{action} container "{self.container}" of {pod}' if self.container else f"{action} {pod}"


def _names(pod: Mapping[str, Any], field: str) -> list[str]:
    containers = (pod.get("spec") or {}).get(field) or ()
    return [str(c.get("name")) for c in containers if isinstance(c, Mapping)]


def _container(subresource: str, pod: Mapping[str, Any], asked: str) -> str:
    """The container a log/exec/attach request is for, as kube-apiserver picks it (400s worded as its)."""
    if subresource == "portforward":
        return ""
    name = pod["metadata"]["name"]
    containers, init = _names(pod, "containers"), _names(pod, "initContainers")
    if not asked:
        if len(containers) == 1:
            return containers[0]
        choice = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        if init:
            choice += f" or one of the init containers: [{' '.join(init)}]"
        raise StatusError.bad_request(choice)
    if asked not in (*containers, *init, *_names(pod, "ephemeralContainers")):
        raise StatusError.bad_request(f"container {asked} is not valid for pod {name}")
    return asked


def target(subresource: str, pod: Mapping[str, Any], container: str) -> Target:
    """Check a request against its pod. Raises StatusError: 400 for a container the pod lacks or
    an ambiguous one, and for an exec/attach/portforward to a pod with no node (a log of such a
    pod is empty, as kube-apiserver answers it)."""
    meta = pod["metadata"]
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    chosen = _container(subresource, pod, container)
    if not node and subresource != "log":
        raise StatusError.bad_request(f"pod {meta['name']} does not have a host assigned")
    return Target(subresource, str(meta.get("namespace", "")), str(meta["name"]), chosen, node)


def check_upgrade(subresource: str, connection: str) -> None:
    """exec, attach and portforward are streams: kube-apiserver answers a request that does not
    ask to upgrade its connection (SPDY or WebSocket) with a 400 before it dials the kubelet."""
    if subresource != "log" and "upgrade" not in (v.strip().lower() for v in connection.split(",")):
        raise StatusError.bad_request("Upgrade request required")


def _is_simulated(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(names.LABEL_SIMULATED_KUBELET) == "true"


def unreachable(t: Target, node: Mapping[str, Any]) -> StatusError:
    """The 500 kube-apiserver sends when it cannot reach the kubelet of `node`, saying why."""
    _, consequence = _ACTIONS[t.subresource]
    if _is_simulated(node):
        why = (
            f'node "{t.node}" is simulated by Tessera ({names.LABEL_SIMULATED_KUBELET}=true): '
            f"no containers run there, so {consequence}"
        )
    else:
        why = f'the Tessera API server does not connect to kubelets, so it cannot reach the kubelet of node "{t.node}"'
    return StatusError(500, "", f"{t.what}: {why}")
