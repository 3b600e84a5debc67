"""The engine's expectations against a real API server: a tracked write holds the key back until
the informer shows it; an untracked one (a controller that recomputes everything on a timer)
does not, so such a controller never stalls behind a slow cache."""

from __future__ import annotations

import uuid

import pytest

from kube.client import Client
from kube.informer import Informer, raw
from kube.resources import NAMESPACES
from kubecontrollers.kinds import PODS
from kubecontrollers.loop import Engine, Metrics
from kubecontrollers.plan import Create, Plan

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("track", "syncs"), [(True, 1), (False, 2)])
def test_a_key_waits_for_its_tracked_writes_only(client: Client, track: bool, syncs: int) -> None:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    client.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    informer = Informer(client, PODS, parse=raw)  # never started: it never shows the write
    calls: list[str] = []

    def sync(key: str) -> Plan:
        calls.append(key)
        body = {"metadata": {"name": f"p{len(calls)}"}, "spec": {"containers": [{"name": "m", "image": "x"}]}}
        return Plan([Create(PODS, namespace, body)], track=track)

    engine = Engine(client, {"pods": informer}, {"c": sync}, metrics=Metrics())
    engine.sync(("c", "k"))
    engine.sync(("c", "k"))
    assert len(calls) == syncs
    assert len(client.resource(PODS).list(namespace=namespace).items) == syncs
