"""Restarts: after SIGTERM or SIGKILL every acknowledged object and the resourceVersion survive."""

from pathlib import Path

import pytest

from apis.crds.device import Device
from apis.errors import ConfigError
from apis.k8s.meta import ObjectMeta
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube import crds
from kube.resources import CONFIG_MAPS, PODS

pytestmark = pytest.mark.integration


def snapshot(server: EmbeddedAPIServer) -> dict[str, tuple[str, object]]:
    with server.client() as c:
        out = {}
        for gvr in (CONFIG_MAPS, PODS):
            for obj in c.resource(gvr).list().items:
                out[f"{gvr.plural}/{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = (
                    obj["metadata"]["resourceVersion"],
                    obj.get("data") or obj.get("spec"),
                )
        for dev in crds.devices(c).list():
            out[f"devices/{dev.meta.name}"] = (dev.meta.resource_version, dev.devices)
        return out


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_objects_and_resource_version_survive(how: str) -> None:
    with run_apiserver() as server:
        server.install_crds()
        with server.client() as c:
            maps = c.resource(CONFIG_MAPS)
            for i in range(50):
                maps.create({"metadata": {"name": f"c{i}"}, "data": {"i": str(i)}}, namespace="default")
            maps.patch("c1", {"data": {"i": "patched"}}, namespace="default")
            maps.delete("c2", namespace="default")
            c.resource(PODS).create(
                {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "i"}]}}, namespace="default"
            )
            crds.devices(c).create(Device(ObjectMeta(name="node-1")))
            last_rv = int(maps.list().resource_version)
        before = snapshot(server)
        if how == "kill":
            server.kill()
            server.start()
        else:
            server.restart()
        assert snapshot(server) == before
        with server.client() as c:
            maps = c.resource(CONFIG_MAPS)
            assert int(maps.list().resource_version) == last_rv
            assert maps.get("c1", namespace="default")["data"] == {"i": "patched"}
            created = maps.create({"metadata": {"name": "after"}}, namespace="default")
            assert int(created["metadata"]["resourceVersion"]) == last_rv + 1
            assert "devices.scheduling.koordinator.sh" in [
                crd["metadata"]["name"] for crd in c.resource(crds.CUSTOM_RESOURCE_DEFINITIONS).list().items
            ]


def test_a_second_server_cannot_share_the_data_directory(tmp_path: Path) -> None:
    with run_apiserver(tmp_path / "one") as server:
        second = EmbeddedAPIServer(tmp_path / "two", extra_args=["--data-dir", str(server.data_dir / "db")])
        with pytest.raises(ConfigError, match="in use by another API server"):
            second.start(timeout=10)
