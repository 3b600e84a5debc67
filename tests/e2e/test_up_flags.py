"""Each flag of `tessera up` has the effect docs/user/up.md promises, on one real `tessera up`
started with all of them at once (a start is the expensive part):

    tessera up --data-dir DIR --port P --nodes 2 --profile l4-3x.yaml --no-local-agent
               --scheduler-address unix://…/elsewhere.sock --v 10 --logging-format json

`--demo`, resuming, bad flags and deadlines are test_up.py's; the default profile is
test_cluster.py's.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from apis.crds.device import DeviceType
from apis.extension import names
from cli.launchers.scheduler import pod_manifest
from cli.localcluster import state
from tests.support.cluster import unique
from tests.support.sockets import free_port
from tests.support.up import Cluster, Up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 180.0
NODES = ["sim-1", "sim-2"]
#: A profile file unlike every built-in one: three L4 GPUs on one PCIe root, no RDMA NIC.
PROFILE = {
    "driverVersion": "550.54.15",
    "gpu": {"name": "NVIDIA L4", "memory": "23034Mi"},
    "node": {"memory": "128Gi", "pods": 110},
    "numaNodes": [
        {
            "node": 0,
            "socket": 0,
            "cpus": "0-31",
            "pcieRoots": [{"root": "pci0000:00", "gpus": ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"]}],
        }
    ],
}


class Flagged:
    """The running `tessera up` and the flag values it was given."""

    def __init__(self, up: Up, *, port: int, scheduler_address: str) -> None:
        self.up = up
        self.port = port
        self.scheduler_address = scheduler_address


@pytest.fixture(scope="module")
def flagged(workdir: Path) -> Iterator[Flagged]:
    data_dir = workdir / "flags"
    data_dir.mkdir()
    # An earlier run's kubeconfig, naming another port: --port must not be fooled by it.
    (data_dir / "kubeconfig").write_text(yaml.safe_dump({"clusters": [{"cluster": {"server": "https://127.0.0.1:1"}}]}))
    profile = workdir / "l4-3x.yaml"
    profile.write_text(yaml.safe_dump(PROFILE))
    port = free_port()
    address = f"unix://{workdir / 'elsewhere.sock'}"  # not the harness's $TESSERA_SCHEDULER_ADDRESS
    flags = ["--port", str(port), "--nodes", "2", "--profile", str(profile), "--no-local-agent"]
    flags += ["--scheduler-address", address, "--v", "10", "--logging-format", "json"]
    with Up.started(data_dir, *flags) as up:
        yield Flagged(up, port=port, scheduler_address=address)
        assert up.interrupt() == 0, up.output()


@pytest.fixture(scope="module")
def cluster(flagged: Flagged) -> Iterator[Cluster]:
    with flagged.up.cluster() as view:
        yield view


def test_port_the_kubeconfig_points_at_it_and_kubectl_answers_there(flagged: Flagged) -> None:
    url = f"https://127.0.0.1:{flagged.port}"
    kubeconfig = yaml.safe_load(flagged.up.kubeconfig.read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == url
    assert flagged.up.state().components["apiserver"].url == url
    assert url in flagged.up.output()  # where people read it
    assert flagged.up.kubectl("get", "--raw", "/readyz") == "ok"
    assert flagged.up.kubectl("config", "view", "-o", "jsonpath={.clusters[0].cluster.server}") == url


def test_nodes_and_no_local_agent_two_simulated_nodes_ready_and_no_other(flagged: Flagged, cluster: Cluster) -> None:
    components = sorted(flagged.up.state().components)
    assert components == [
        "agent/sim-1",
        "agent/sim-2",
        "apiserver",
        "controller",
        "dashboard",
        "descheduler",
        "kube-controller-manager",
        "scheduler",
    ]
    wait_for(
        lambda: sorted(n.name for n in cluster.nodes().values() if n.ready) == NODES,
        timeout_s=TIMEOUT_S,
        what="sim-1 and sim-2 Ready",
    )
    listed = json.loads(flagged.up.kubectl("get", "nodes", "-o", "json"))["items"]
    assert sorted(n["metadata"]["name"] for n in listed) == NODES  # and not this machine
    assert sorted(p.name for p in (flagged.up.data_dir / "agents").iterdir()) == NODES


def test_profile_file_each_node_has_its_devices(flagged: Flagged, cluster: Cluster) -> None:
    def offering() -> bool:
        return all(cluster.nodes().get(n) and cluster.nodes()[n].allocatable.get(names.GPU_CORE) for n in NODES)

    wait_for(offering, timeout_s=TIMEOUT_S, what="both nodes offering the profile's GPUs")
    devices = cluster.devices()
    for node in NODES:
        gpus = devices[node].of_type(DeviceType.GPU)
        assert [g.minor for g in gpus] == [0, 1, 2]
        assert {g.resources[names.GPU_MEMORY] for g in gpus} == {23034 * 2**20}
        assert devices[node].of_type(DeviceType.RDMA) == ()
        assert devices[node].meta.labels[names.LABEL_GPU_MODEL] == "L4"
        allocatable = cluster.nodes()[node].allocatable
        assert (allocatable[names.GPU_CORE], allocatable.get(names.RDMA)) == (300, None)


def test_scheduler_address_the_grpc_api_is_there_for_tessera_explain(flagged: Flagged, cluster: Cluster) -> None:
    assert flagged.up.state().components["scheduler"].grpc == flagged.scheduler_address
    assert Path(flagged.scheduler_address.removeprefix("unix://")).is_socket()
    assert not Path(flagged.up.scheduler_address.removeprefix("unix://")).exists()  # the flag beat the environment
    namespace = unique("flags")
    cluster.create_namespace(namespace)
    manifest = pod_manifest("four-gpus", {names.NVIDIA_GPU: "4"})  # the profile has 3 a node
    del manifest["metadata"]["namespace"]
    cluster.create_pods(namespace, [manifest])
    wait_for(
        lambda: cluster.pods(namespace)[0].pending_message, timeout_s=TIMEOUT_S, what="four-gpus to be unschedulable"
    )
    explanation = flagged.up.tessera("explain", "four-gpus", "-n", namespace, "--scheduler", flagged.scheduler_address)
    assert f"Pod {namespace}/four-gpus: pending" in explanation
    assert "Insufficient gpu devices" in explanation


def test_data_dir_v_and_logging_format_everything_is_there_and_up_log_is_json(flagged: Flagged) -> None:
    data_dir = flagged.up.data_dir
    expected = ["kubeconfig", "token", "db", state.FILE_NAME, "up.log", "apiserver.log"]
    expected += ["controller/controller.log", "scheduler/scheduler.log", "agents/sim-1/agent.log"]
    assert [path for path in expected if not (data_dir / path).exists()] == []
    assert flagged.up.state().data_dir == str(data_dir.resolve())
    records = [json.loads(line) for line in (data_dir / "up.log").read_text().splitlines()]
    assert "Wrote the state file" in {r["msg"] for r in records}  # a V(10) message: shown with --v 10 only


def test_port_is_kept_when_the_api_server_is_restarted(flagged: Flagged, cluster: Cluster) -> None:
    """Last: it restarts a component the other tests use."""
    up = flagged.up
    killed = up.state().components["apiserver"].pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    up.wait_restarted("apiserver", killed)
    assert up.state().components["apiserver"].url == f"https://127.0.0.1:{flagged.port}"
    assert sorted(cluster.nodes()) == NODES  # the same kubeconfig, the same objects
