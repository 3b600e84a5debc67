"""The agent as `tessera up` runs it: as its node (`system:node:NAME`), with its endpoints authenticated.

A `tessera apiserver` over HTTPS with tokens, and a `tessera agent` (simulated devices and
kubelet) with its node's credentials only: the Node authorizer and NodeRestriction must let it do
all its work (register its Node, renew its Lease, report its Device CR and ResourceSlices, watch
its pods) and refuse it another node's ResourceSlices, as kube's do. Its
HTTP endpoints answer through the API server: an anonymous `POST /health/clear` gets kube's 403
and changes nothing; `tessera gpu` sends the caller's kubeconfig credentials, and RBAC decides
(an operator bound to a role with `post` on `/health/clear` may, a user without it may not);
`/metrics` answers whoever may `get` it (`tessera-metrics-reader`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis import dra
from apis.crds.device import Device, DeviceType
from apis.dra import gpus
from apis.extension import names
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.launchers.base import KubeconfigCredentials
from cli.localcluster import identities
from kube import errors
from kube.client import Client
from kube.resources import LEASES
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

NODE = "sim-identity-1"
RBAC = "rbac.authorization.k8s.io"
OPERATOR = identities.Identity("gpu-operator")
STRANGER = identities.Identity("stranger")
SCRAPER = identities.Identity("prometheus")


def _binding(role: str, account: str) -> dict[str, object]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{account}:{role}"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": identities.NAMESPACE}],
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedAPIServer, dict[str, Path]]]:
    directory = tmp_path_factory.mktemp("identity")
    wanted = [identities.Identity.of_node(NODE), OPERATOR, STRANGER, SCRAPER]
    tokens = identities.ensure_tokens(directory / "tokens.csv", wanted)
    with run_apiserver(
        directory, secure=True, extra_args=["--token-auth-file", str(directory / "tokens.csv")]
    ) as server:
        server.install_crds()
        with server.client() as admin:
            clearer = {
                "apiVersion": f"{RBAC}/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "gpu-fault-clearer"},
                "rules": [{"nonResourceURLs": ["/health/clear"], "verbs": ["post"]}],
            }
            identities.apply_manifests(admin, identities.rbac_manifests())
            identities.apply_manifests(
                admin,
                [
                    clearer,
                    _binding("gpu-fault-clearer", "gpu-operator"),
                    _binding("tessera-metrics-reader", "prometheus"),
                ],
            )
        yield server, identities.component_kubeconfigs(directory / "kubeconfigs", server.kubeconfig, tokens)


@pytest.fixture(scope="module")
def agent(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> Iterator[AgentProcess]:
    kubeconfigs = cluster[1]
    args = ["--simulate-devices", "a100-8x", "--simulate-kubelet", "--qos", "off", "--no-hook-server", "--dra"]
    process = AgentProcess(kubeconfigs[f"node-{NODE}"], node_name=NODE, args=args)
    process.credentials = None  # the test says who asks, request by request
    with process:
        yield process


@pytest.fixture
def admin(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> Iterator[Client]:
    with cluster[0].client() as client:
        yield client


def gpu_health(client: Client, minor: int) -> bool | None:
    try:
        cr = Device.from_dict(client.resource(names.DEVICES).get(NODE))
    except Exception:
        return None
    return next(d.health for d in cr.of_type(DeviceType.GPU) if d.minor == minor)


def post(url: str, token: str = "") -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, data=b"", method="POST")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def gpu(kubeconfig: Path, agent: AgentProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cli", "gpu", *args, "--node", NODE, "--kubeconfig", str(kubeconfig)]
    return subprocess.run([*command, "--agent", agent.url], capture_output=True, text=True, timeout=60, check=False)


def test_the_agent_does_all_its_work_as_its_node(agent: AgentProcess, admin: Client) -> None:
    wait_for(lambda: gpu_health(admin, 3) is True, what="the Device CR, reported by the agent as its node")
    wait_for(lambda: admin.resource(LEASES).get(NODE, namespace=names.NAMESPACE_NODE_LEASE), what="its Lease")
    assert "is forbidden: User" not in agent.log_text(), "the API server refused the agent something"


def _slices(client: Client, node: str) -> list[dict[str, Any]]:
    return client.resource(dra.RESOURCE_SLICES).list_all(field_selector=f"spec.nodeName={node}").items


def _slice(node: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": gpus.DRIVER, "nodeName": node, "pool": {"name": node, "resourceSliceCount": 1}},
    }


def test_the_agent_publishes_its_slices_and_no_other_nodes(
    agent: AgentProcess, cluster: tuple[EmbeddedAPIServer, dict[str, Path]], admin: Client
) -> None:
    wait_for(lambda: len(_slices(admin, NODE)) == 2, what="the agent's ResourceSlices (GPUs, RDMA NICs)")
    other = "sim-identity-other"
    admin.resource(dra.RESOURCE_SLICES).create(_slice(other, "other-slice"))
    with Client.from_kubeconfig(cluster[1][f"node-{NODE}"]) as as_node:
        api = as_node.resource(dra.RESOURCE_SLICES)
        assert len(_slices(as_node, NODE)) == 2  # its own, listed as its informer would
        with pytest.raises(errors.Forbidden) as created:
            api.create(_slice(other, "forged"))
        assert "can only create ResourceSlice with the same NodeName as the requesting node" in str(created.value)
        with pytest.raises(errors.Forbidden) as listed:
            api.list()
        assert "can only list/watch/deletecollection resourceslices with nodeName field selector" in str(listed.value)
        for attempt in (lambda: api.get("other-slice"), lambda: api.delete("other-slice")):
            with pytest.raises(errors.Forbidden) as refused:
                attempt()
            assert "no relationship found between node" in str(refused.value)
        mine = api.create(_slice(NODE, "own-extra"))  # its own node: allowed (the agent deletes it later)
        api.delete(mine["metadata"]["name"])
    assert admin.resource(dra.RESOURCE_SLICES).get("other-slice")["spec"]["nodeName"] == other


def test_anonymous_writes_are_refused_and_change_nothing(agent: AgentProcess, admin: Client) -> None:
    wait_for(lambda: gpu_health(admin, 2) is True, what="GPU 2 healthy")
    code, body = post(f"{agent.url}/debug/simulate/xid?minor=2&xid=79")
    assert (code, body["message"]) == (403, 'forbidden: User "system:anonymous" cannot post path "/debug/simulate/xid"')
    code, body = post(f"{agent.url}/health/clear?minor=2")
    assert (code, body["message"]) == (403, 'forbidden: User "system:anonymous" cannot post path "/health/clear"')
    assert gpu_health(admin, 2) is True


def test_tessera_gpu_sends_the_callers_credentials_and_rbac_decides(
    agent: AgentProcess, cluster: tuple[EmbeddedAPIServer, dict[str, Path]], admin: Client
) -> None:
    server, kubeconfigs = cluster
    broke = gpu(server.kubeconfig, agent, "fault", "--minor", "5", "--xid", "79")  # cluster-admin
    assert broke.returncode == 0, broke.stderr
    assert json.loads(broke.stdout) == {"minor": 5, "uuid": json.loads(broke.stdout)["uuid"], "fault": "xid", "xid": 79}
    wait_for(lambda: gpu_health(admin, 5) is False, what="GPU 5 unhealthy")
    refused = gpu(kubeconfigs["stranger"], agent, "clear", "--minor", "5")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"tessera gpu clear: the agent of {NODE} answered 403: forbidden: User "
        '"system:serviceaccount:tessera-system:stranger" cannot post path "/health/clear"'
    )
    assert gpu_health(admin, 5) is False
    cleared = gpu(kubeconfigs["gpu-operator"], agent, "clear", "--minor", "5")
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(cleared.stdout)["cleared"] is True
    wait_for(lambda: gpu_health(admin, 5) is True, what="GPU 5 healthy again")


def test_metrics_answer_a_scraper_with_the_metrics_reader_role(
    agent: AgentProcess, cluster: tuple[EmbeddedAPIServer, dict[str, Path]]
) -> None:
    authorization = KubeconfigCredentials(cluster[1]["prometheus"]).authorization()
    assert authorization is not None
    request = urllib.request.Request(f"{agent.url}/metrics", headers={"Authorization": authorization})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert "tessera_gpu_healthy" in response.read().decode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{agent.url}/metrics", timeout=10)
    assert refused.value.code == 403
    refused.value.close()
