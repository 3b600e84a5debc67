"""The simulated kubelet's DRA manager: what it asks the plugin, what its checkpoint keeps through
a crash at any point, and kubelet's messages. The plugin here is a recording stand-in (the real
one over its sockets: tests/integration/agent/test_kubeletsim_dra.py)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from agent.kubeletsim.claims import ClaimStates, DRAManager, PrepareFailed
from agent.kubeletsim.draclient import ClaimRef
from apis.dra.gpus import DRIVER
from apis.k8s.core import Pod
from kube import errors
from proto.kubelet.dra.v1 import api_pb2 as dra


class Plugin:
    """Answers like the agent's plugin; `crash` makes the next prepare fail after it prepared."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.crash = False
        self.error = ""

    def plugin(self, driver: str) -> Plugin | None:
        return self if driver == DRIVER else None

    def prepare(self, claims: Iterable[ClaimRef]) -> dra.NodePrepareResourcesResponse:
        refs = list(claims)
        self.calls.append(("prepare", [c.name for c in refs]))
        if self.crash:
            raise RuntimeError("the kubelet died before it read the answer")
        answer = dra.NodePrepareResourcesResponse()
        for c in refs:
            if self.error:
                answer.claims[c.uid].error = self.error
            else:
                answer.claims[c.uid].devices.add(
                    request_names=["gpu"],
                    pool_name="n",
                    device_name="gpu-0",
                    cdi_device_ids=[f"{DRIVER}/claim={c.uid}"],
                )
        return answer

    def unprepare(self, claims: Iterable[ClaimRef]) -> dra.NodeUnprepareResourcesResponse:
        refs = list(claims)
        self.calls.append(("unprepare", [c.name for c in refs]))
        answer = dra.NodeUnprepareResourcesResponse()
        for c in refs:
            answer.claims[c.uid].error = ""
        return answer


def pod(name: str, claim: str = "c") -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {
                "nodeName": "n",
                "resourceClaims": [
                    {"name": "gpu", "resourceClaimName": claim},
                    {"name": "unused", "resourceClaimName": "x"},
                ],
                "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        }
    )


def claim(name: str = "c", *, reserved: Iterable[str] = ("a",), allocated: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved]}
    if allocated:
        result = {"request": "gpu", "driver": DRIVER, "pool": "n", "device": "gpu-0"}
        status["allocation"] = {"devices": {"results": [result]}}
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {}, "status": status}


def manager(tmp_path: Path, plugin: Plugin, claims: dict[str, dict[str, Any]]) -> DRAManager:
    def get(namespace: str, name: str) -> dict[str, Any]:
        if name not in claims:
            raise errors.NotFound(f'resourceclaims.resource.k8s.io "{name}" not found')
        return claims[name]

    made = DRAManager(get_claim=get, registry_dir=tmp_path, states=ClaimStates(tmp_path), plugins=plugin)  # type: ignore[arg-type]
    made.start()
    return made


def test_only_used_claims_are_prepared_once_and_a_restart_does_not_ask_again(tmp_path: Path) -> None:
    plugin = Plugin()
    first = manager(tmp_path, plugin, {"c": claim()})
    assert first.prepare(pod("a")) == (f"{DRIVER}/claim=uid-c",)
    assert plugin.calls == [("prepare", ["c"])]  # "unused" is named by no container
    restarted = manager(tmp_path, plugin, {"c": claim()})
    assert restarted.prepare(pod("a")) == (f"{DRIVER}/claim=uid-c",)
    assert plugin.calls == [("prepare", ["c"])]
    assert restarted.claims()["uid-c"].prepared


def test_a_crash_after_the_plugin_prepared_still_unprepares_the_claim_when_its_pod_is_gone(tmp_path: Path) -> None:
    plugin = Plugin()
    plugin.crash = True
    with pytest.raises(RuntimeError):
        manager(tmp_path, plugin, {"c": claim()}).prepare(pod("a"))
    plugin.crash = False
    restarted = manager(tmp_path, plugin, {})
    state = restarted.claims()["uid-c"]
    assert not state.prepared and state.pods == {"uid-a"}
    restarted.reconcile(live_pods=[])
    assert plugin.calls[-1] == ("unprepare", ["c"])
    assert manager(tmp_path, plugin, {}).claims() == {}


def test_a_shared_claim_is_unprepared_with_its_last_pod(tmp_path: Path) -> None:
    plugin = Plugin()
    m = manager(tmp_path, plugin, {"c": claim(reserved=("a", "b"))})
    m.prepare(pod("a"))
    m.prepare(pod("b"))
    assert plugin.calls == [("prepare", ["c"])]
    m.unprepare("uid-a")
    assert plugin.calls == [("prepare", ["c"])] and m.holds("uid-b") and not m.holds("uid-a")
    m.unprepare("uid-b")
    assert plugin.calls[-1] == ("unprepare", ["c"]) and m.claims() == {}


@pytest.mark.parametrize(
    ("claims", "error", "message"),
    [
        ({}, "", "failed to fetch ResourceClaim c referenced by pod a: "),
        ({"c": claim(reserved=("b",))}, "", "pod a (uid-a) is not allowed to use ResourceClaim c (uid-c)"),
        ({"c": claim(allocated=False)}, "", "ResourceClaim ns/c is not allocated"),
        (
            {"c": claim()},
            "too full",
            "prepare dynamic resources: NodePrepareResources failed for ResourceClaim c: too full",
        ),
    ],
    ids=["missing", "not-reserved", "not-allocated", "plugin-error"],
)
def test_what_keeps_a_pod_from_running_is_said_in_kubelets_words(
    tmp_path: Path, claims: dict[str, dict[str, Any]], error: str, message: str
) -> None:
    plugin = Plugin()
    plugin.error = error
    with pytest.raises(PrepareFailed) as failed:
        manager(tmp_path, plugin, claims).prepare(pod("a"))
    assert str(failed.value).startswith(message), str(failed.value)


def test_an_unregistered_driver_is_named(tmp_path: Path) -> None:
    other = claim()
    other["status"]["allocation"]["devices"]["results"][0]["driver"] = "other.example.com"
    with pytest.raises(PrepareFailed, match="DRA driver other.example.com is not registered"):
        manager(tmp_path, Plugin(), {"c": other}).prepare(pod("a"))


def test_a_checkpoint_it_did_not_write_stops_it(tmp_path: Path) -> None:
    (tmp_path / "kubelet-dra-claims.json").write_text('{"version": 7}')
    with pytest.raises(PrepareFailed, match="not what was written"):
        manager(tmp_path, Plugin(), {})
