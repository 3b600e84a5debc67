"""Pods: the defaults and update rules kube-apiserver applies, and the binding subresource.

The scheduler's contract with the API server lives here: a pod is created Pending with its QoS
class computed and its resources checked as kube-apiserver checks them (`requirements.py`, on
create and on every spec change), its spec is immutable but for images, tolerations (additions)
and deadlines, and `pods/binding` is the one way to set `spec.nodeName` — once (a second binding
is a 409).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from apis.errors import TesseraError, ValidationError
from apis.extension import names, qos
from apis.k8s.core import Pod, Taint, Toleration
from apis.k8s.meta import now_rfc3339
from apiserver import requirements
from apiserver.dra import podclaims
from apiserver.errors import Cause, StatusError
from apiserver.strategy import Strategy
from apiserver.validation import dns_label, dns_subdomain

__all__ = ["PodStrategy", "binder", "default_pod_spec", "default_toleration_seconds"]

_IMMUTABLE_MESSAGE = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
    "tolerations), `spec.terminationGracePeriodSeconds` or `spec.schedulingGates` (only removals)"
)


def _default_container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image")
    if isinstance(image, str) and "imagePullPolicy" not in c:
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        c["imagePullPolicy"] = "IfNotPresent" if tagged and not image.endswith(":latest") else "Always"
    res = c.get("resources")
    if isinstance(res, dict) and isinstance(res.get("limits"), dict):
        requests = res.get("requests")
        res["requests"] = {**res["limits"], **(requests if isinstance(requests, dict) else {})}


def default_pod_spec(obj: dict[str, Any]) -> None:
    """Fill the defaults kube-apiserver gives a pod (or a pod template: `{"metadata", "spec"}`)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("securityContext", {})
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or ():
            if isinstance(c, dict):
                _default_container(c)


def _tolerates(tolerations: list[Any], taint: Taint) -> bool:
    """Whether any of `tolerations` (raw, as stored) tolerates `taint`; one that does not parse
    tolerates nothing (validation reports it)."""
    for i, raw in enumerate(tolerations):
        try:
            if Toleration.from_dict(raw, f"spec.tolerations[{i}]").tolerates(taint):
                return True
        except ValidationError:
            continue
    return False


def default_toleration_seconds(obj: dict[str, Any]) -> None:
    """kube-apiserver's DefaultTolerationSeconds admission, on create: a pod that tolerates neither
    `node.kubernetes.io/not-ready:NoExecute` nor `node.kubernetes.io/unreachable:NoExecute` gets a
    toleration of each for 300 s, so that the node lifecycle controller evicts it from a lost node
    after five minutes rather than at once."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = []
    if not isinstance(tolerations, list):
        return  # validation says why
    added = [
        {
            "key": key,
            "operator": "Exists",
            "effect": names.TAINT_EFFECT_NO_EXECUTE,
            "tolerationSeconds": names.DEFAULT_TOLERATION_SECONDS,
        }
        for key in (names.TAINT_NODE_NOT_READY, names.TAINT_NODE_UNREACHABLE)
        if not _tolerates(tolerations, Taint(key, "", names.TAINT_EFFECT_NO_EXECUTE))
    ]
    if added:
        spec["tolerations"] = [*tolerations, *added]


def _mutable_view(spec: Any) -> Any:
    """The spec without the fields an update may change."""
    if not isinstance(spec, dict):
        return spec
    view = copy.deepcopy(spec)
    for field in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"):
        view.pop(field, None)
    for field in ("containers", "initContainers"):
        for c in view.get(field) or ():
            if isinstance(c, dict):
                c.pop("image", None)
    return view


class PodStrategy(Strategy):
    def prepare_create(self, obj: dict[str, Any]) -> None:
        default_pod_spec(obj)
        default_toleration_seconds(obj)
        obj["status"] = {"phase": "Pending"}

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        default_pod_spec(new)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [*causes, Cause("spec", "Required value", "FieldValueRequired")]
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append(Cause("spec.containers", "Required value", "FieldValueRequired"))
        seen: set[str] = set()
        for field in ("containers", "initContainers"):
            for i, c in enumerate(spec.get(field) or ()):
                path = f"spec.{field}[{i}]"
                if not isinstance(c, dict):
                    causes.append(Cause(path, "must be an object", "FieldValueTypeInvalid"))
                    continue
                name = c.get("name")
                if not isinstance(name, str) or not name:
                    causes.append(Cause(f"{path}.name", "Required value", "FieldValueRequired"))
                elif why := dns_label(name):
                    causes.append(Cause(f"{path}.name", f"Invalid value: {name!r}: {why}"))
                elif name in seen:
                    causes.append(Cause(f"{path}.name", f"Duplicate value: {name!r}", "FieldValueDuplicate"))
                else:
                    seen.add(name)
                if not isinstance(c.get("image"), str) or not c["image"]:
                    causes.append(Cause(f"{path}.image", "Required value", "FieldValueRequired"))
        node = spec.get("nodeName")
        if node is not None and (not isinstance(node, str) or (node and dns_subdomain(node))):
            causes.append(Cause("spec.nodeName", f"Invalid value: {node!r}"))
        unchanged = old is not None and spec == old.get("spec")
        if not unchanged:
            # Quantities are the most expensive check the server makes, so once per create or
            # spec change (an unchanged spec passed them when it was stored).
            causes += requirements.validate_pod(spec)
            causes += podclaims.validate_pod_claims(spec)
        if old is None or obj.get("status") != old.get("status"):
            causes += podclaims.validate_pod_claim_statuses(spec, obj.get("status") or {})
        if not causes and not unchanged:
            # On create the same parse gives the QoS class kube-apiserver records.
            try:
                parsed = Pod.from_dict(obj)
            except ValidationError as e:
                causes.append(Cause(e.field, f"Invalid value: {e.reason}"))
            except TesseraError as e:
                causes.append(Cause("spec", f"Invalid value: {e}"))
            else:
                if old is None:
                    obj["status"]["qosClass"] = qos.kube_qos_class(parsed).value
        if old is not None and not unchanged and _mutable_view(spec) != _mutable_view(old.get("spec")):
            causes.append(Cause("spec", _IMMUTABLE_MESSAGE, "FieldValueForbidden"))
        if old is not None and isinstance(spec.get("tolerations"), list):
            kept = spec["tolerations"]
            if any(t not in kept for t in (old.get("spec") or {}).get("tolerations") or ()):
                causes.append(Cause("spec.tolerations", _IMMUTABLE_MESSAGE, "FieldValueForbidden"))
        return causes


def binder(binding: Any, pod_name: str) -> Callable[[dict[str, Any]], None]:
    """The change a `Binding` makes to its pod: set the node, once, and mark it scheduled."""
    if not isinstance(binding, dict):
        raise StatusError.bad_request("the body must be a Binding object")
    meta = binding.get("metadata") or {}
    target = binding.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("name"), str) or not target["name"]:
        raise StatusError.invalid("Binding", pod_name, [Cause("target.name", "Required value", "FieldValueRequired")])
    if target.get("kind") not in (None, "", "Node"):
        raise StatusError.invalid("Binding", pod_name, [Cause("target.kind", "must be empty or Node")])
    if not isinstance(meta, dict) or meta.get("name", pod_name) != pod_name:
        raise StatusError.bad_request("the name of the binding does not match the pod on the URL")
    node = target["name"]
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise StatusError.bad_request("metadata.annotations must be an object")

    def bind(pod: dict[str, Any]) -> None:
        pmeta = pod["metadata"]
        if meta.get("uid") and meta["uid"] != pmeta["uid"]:
            raise StatusError.conflict("pods", pod_name, "the binding's uid does not match the pod")
        if pmeta.get("deletionTimestamp"):
            raise StatusError.conflict("pods/binding", pod_name, "pod is being deleted, cannot be assigned to a host")
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise StatusError.conflict(
                "pods/binding", pod_name, f'pod {pod_name} is already assigned to node "{current}"'
            )
        pod.setdefault("spec", {})["nodeName"] = node
        if annotations:
            pmeta["annotations"] = {**(pmeta.get("annotations") or {}), **annotations}
        status = pod.setdefault("status", {})
        conditions = [
            c for c in status.get("conditions") or () if not (isinstance(c, dict) and c.get("type") == "PodScheduled")
        ]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
        )
        status["conditions"] = conditions

    return bind
