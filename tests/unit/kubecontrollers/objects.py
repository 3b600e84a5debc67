"""Objects as the API server stores them, for the controllers' pure decisions."""

from typing import Any

TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "m", "image": "x"}]}}


def meta(name: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "resourceVersion": "1",
        "generation": 1,
        "creationTimestamp": "2024-01-01T00:00:00Z",
        **extra,
    }


def owner(kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True}]


def pod(
    name: str,
    *,
    owned_by: tuple[str, str, str] | None = None,
    phase: str = "Running",
    ready: bool = True,
    **labels: str,
) -> dict[str, Any]:
    extra: dict[str, Any] = {"labels": labels or {"app": "web"}}
    if owned_by is not None:
        extra["ownerReferences"] = owner(*owned_by)
    conditions = [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    ]
    return {
        "metadata": meta(name, f"uid-{name}", **extra),
        "spec": {"nodeName": "n1"},
        "status": {"phase": phase, "conditions": conditions},
    }


def replicaset(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": meta(name, f"uid-{name}", **extra),
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
        "status": {},
    }
