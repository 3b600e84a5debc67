"""Restarts: after SIGTERM or SIGKILL every acknowledged object and the resourceVersion survive."""

from pathlib import Path

import pytest

from apis.crds.device import Device
from apis.errors import ConfigError
from apis.k8s.meta import ObjectMeta
from apiserver.storage import Storage
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


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_store_is_private_to_its_owner(tmp_path: Path) -> None:
    """Every Secret is in objects.db: the directory is 0700 and the database and its WAL 0600, as
    etcd keeps its data directory; a store left readable by an older version is tightened at start."""
    with run_apiserver(tmp_path) as server, server.client() as c:
        c.resource(CONFIG_MAPS).create({"metadata": {"name": "c"}}, namespace="default")
    db = tmp_path / "db"
    files = [db / "objects.db", db / "objects.db-wal"]
    assert _mode(db) == 0o700
    assert {f.name: _mode(f) for f in files if f.exists()} == {f.name: 0o600 for f in files if f.exists()}
    assert (db / "objects.db").exists()

    db.chmod(0o755)
    for f in db.iterdir():
        if f.name.startswith("objects.db"):
            f.chmod(0o644)
    storage = Storage(db)
    try:
        assert _mode(db) == 0o700
        assert {f.name: _mode(f) for f in db.iterdir() if f.name.startswith("objects.db")} == {
            f.name: 0o600 for f in db.iterdir() if f.name.startswith("objects.db")
        }
    finally:
        storage.close()
