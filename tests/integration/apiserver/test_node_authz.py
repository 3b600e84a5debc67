"""One identity per node: the Node authorizer and NodeRestriction, with a node's own token and real kubectl.

Two nodes, each with its Device CR and a pod bound to it; `sim-1`'s agent credentials
(`system:node:sim-1` in `system:nodes`, as `tessera up` issues them) try every write an agent
must not make — the other node's Device with a GPU marked unhealthy, the other node's
allocatable, deleting a pod that is not its own, creating a Node — and get kube-apiserver's
answers (the Node authorizer's reason, or NodeRestriction's message); and what an agent does for
its own node still works.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.localcluster import identities
from kube import errors
from kube.client import Client
from kube.resources import LEASES, NODES, PODS
from tests.support.kubectl import KubectlBinary, kubectl_binaries

pytestmark = pytest.mark.integration

KUBECTLS = kubectl_binaries()
NODE_1, NODE_2 = "sim-1", "sim-2"
AGENT = 'User "system:node:sim-1"'


def _device(node: str, healthy: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": f"{names.DEVICES.group}/{names.DEVICES.version}",
        "kind": "Device",
        "metadata": {"name": node},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "uuid": f"GPU-{node}-0",
                    "minor": 0,
                    "health": healthy,
                    "resources": {"koordinator.sh/gpu-core": "100"},
                }
            ]
        },
    }


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedAPIServer, dict[str, Path]]]:
    directory = tmp_path_factory.mktemp("nodes")
    wanted = [identities.Identity.of_node(NODE_1), identities.Identity.of_node(NODE_2)]
    tokens = identities.ensure_tokens(directory / "tokens.csv", wanted)
    with run_apiserver(
        directory, secure=True, extra_args=["--token-auth-file", str(directory / "tokens.csv")]
    ) as server:
        server.install_crds()
        with server.client() as admin:
            for node in (NODE_1, NODE_2):
                admin.resource(NODES).create({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}})
                admin.resource(names.DEVICES).create(_device(node))
                admin.resource(PODS).create(_pod(f"on-{node}", node), namespace="default")
        yield server, identities.component_kubeconfigs(directory / "kubeconfigs", server.kubeconfig, tokens)


@pytest.fixture
def agent(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> Iterator[Client]:
    with Client.from_kubeconfig(cluster[1][f"node-{NODE_1}"]) as client:
        yield client


@pytest.fixture
def admin(cluster: tuple[EmbeddedAPIServer, dict[str, Path]]) -> Iterator[Client]:
    with cluster[0].client() as client:
        yield client


def test_a_node_writes_its_own_objects(agent: Client, admin: Client) -> None:
    devices = agent.resource(names.DEVICES)
    mine = devices.get(NODE_1)
    mine["spec"]["devices"][0]["health"] = False
    devices.update(mine)  # the agent's reporter PUTs its Device
    assert admin.resource(names.DEVICES).get(NODE_1)["spec"]["devices"][0]["health"] is False
    status = {"status": {"allocatable": {"koordinator.sh/gpu-core": "100"}}}
    agent.resource(NODES).patch(NODE_1, status, subresource="status")
    agent.resource(NODES).get(NODE_1)
    lease = {"metadata": {"name": NODE_1}, "spec": {"holderIdentity": NODE_1}}
    agent.resource(LEASES).create(lease, namespace=names.NAMESPACE_NODE_LEASE)
    agent.resource(LEASES).patch(NODE_1, {"spec": {"leaseDurationSeconds": 40}}, namespace=names.NAMESPACE_NODE_LEASE)
    agent.resource(PODS).patch(
        f"on-{NODE_1}", {"status": {"phase": "Running"}}, namespace="default", subresource="status"
    )
    assert [
        p["metadata"]["name"] for p in agent.resource(PODS).list(field_selector=f"spec.nodeName={NODE_1}").items
    ] == [f"on-{NODE_1}"]
    event = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Node", "name": NODE_1}, "reason": "Test"}
    agent.request("POST", "/api/v1/namespaces/default/events", body=event)


def test_a_node_cannot_touch_another_nodes_objects(agent: Client, admin: Client) -> None:
    theirs = admin.resource(names.DEVICES).get(NODE_2)
    theirs["spec"]["devices"][0]["health"] = False
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(names.DEVICES).update(theirs)
    assert e.value.message == (
        f'devices.scheduling.koordinator.sh "{NODE_2}" is forbidden: {AGENT} cannot update resource "devices" '
        'in API group "scheduling.koordinator.sh" at the cluster scope: '
        "can only access devices with the same name as the requesting node"
    )
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(names.DEVICES).create(_device("sim-3"))
    assert e.value.message == (
        'devices.scheduling.koordinator.sh "sim-3" is forbidden: node "sim-1" can only modify the Device named '
        "after itself"
    )
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(NODES).patch(NODE_2, {"status": {"allocatable": {"cpu": "99999"}}}, subresource="status")
    assert e.value.message == f'nodes "{NODE_2}" is forbidden: node "{NODE_1}" is not allowed to modify node "{NODE_2}"'
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(PODS).delete(f"on-{NODE_2}", namespace="default")
    assert e.value.message == (
        f'pods "on-{NODE_2}" is forbidden: node "{NODE_1}" can only delete pods with spec.nodeName set to itself'
    )
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(NODES).create({"metadata": {"name": "evil"}})
    assert e.value.message == f'nodes "evil" is forbidden: node "{NODE_1}" is not allowed to modify node "evil"'
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(NODES).get(NODE_2)
    assert e.value.message.endswith(f"node '{NODE_1}' cannot read '{NODE_2}', only its own Node object")
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(PODS).list()
    assert e.value.message.endswith("can only list/watch pods with spec.nodeName field selector")
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(PODS).patch(
            f"on-{NODE_2}", {"status": {"phase": "Failed"}}, namespace="default", subresource="status"
        )
    assert "can only update pod status for pods with spec.nodeName set to itself" in e.value.message
    # Nothing changed.
    assert admin.resource(names.DEVICES).get(NODE_2)["spec"]["devices"][0]["health"] is True
    assert admin.resource(PODS).get(f"on-{NODE_2}", namespace="default")["metadata"].get("deletionTimestamp") is None


def test_a_node_cannot_steer_workloads_with_its_own_taints_or_labels(agent: Client) -> None:
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(NODES).patch(NODE_1, {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}})
    assert e.value.message == f'nodes "{NODE_1}" is forbidden: node "{NODE_1}" is not allowed to modify taints'
    with pytest.raises(errors.Forbidden) as e:
        agent.resource(NODES).patch(NODE_1, {"metadata": {"labels": {"node-restriction.kubernetes.io/gpu": "a100"}}})
    assert e.value.message.endswith("is not allowed to modify labels: node-restriction.kubernetes.io/gpu")
    agent.resource(NODES).patch(NODE_1, {"metadata": {"labels": {"tessera.dev/node": "true"}}})


def test_access_reviews_and_whoami_name_the_node(admin: Client, agent: Client) -> None:
    me = agent.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={"kind": "SelfSubjectReview"})
    assert me["status"]["userInfo"]["username"] == "system:node:sim-1"
    assert "system:nodes" in me["status"]["userInfo"]["groups"]
    review = {
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {
            "user": "system:node:sim-1",
            "groups": ["system:nodes", "system:authenticated"],
            "resourceAttributes": {"verb": "get", "resource": "nodes", "name": NODE_2},
        },
    }
    answer = admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)["status"]
    assert answer == {"allowed": False, "reason": "node 'sim-1' cannot read 'sim-2', only its own Node object"}


@pytest.mark.skipif(not KUBECTLS, reason="no kubectl installed")
@pytest.mark.parametrize("kubectl", KUBECTLS, ids=lambda k: k.id)
def test_kubectl_as_the_agent_gets_kubes_answers(
    cluster: tuple[EmbeddedAPIServer, dict[str, Path]], kubectl: KubectlBinary, tmp_path: Path
) -> None:
    kubeconfig = cluster[1][f"node-{NODE_1}"]
    unhealthy = tmp_path / "device.json"
    with cluster[0].client() as admin:
        theirs = admin.resource(names.DEVICES).get(NODE_2)
        node = admin.resource(NODES).get(NODE_2)
    theirs["spec"]["devices"][0]["health"] = False
    unhealthy.write_text(json.dumps(theirs))
    node["status"] = {"allocatable": {"koordinator.sh/gpu-core": "99999"}}
    bigger = tmp_path / "node.json"
    bigger.write_text(json.dumps(node))
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "evil"}}))

    def refused(*args: str) -> str:
        result = kubectl.run(kubeconfig, *args)
        assert result.returncode != 0, result.stdout
        return result.stderr

    assert (
        f'devices.scheduling.koordinator.sh "{NODE_2}" is forbidden: {AGENT} cannot update resource "devices" '
        'in API group "scheduling.koordinator.sh" at the cluster scope: can only access devices with the same '
        "name as the requesting node"
    ) in refused("replace", "-f", str(unhealthy))
    assert f'node "{NODE_1}" is not allowed to modify node "{NODE_2}"' in refused(
        "replace", "--raw", f"/api/v1/nodes/{NODE_2}/status", "-f", str(bigger)
    )
    assert (
        f'pods "on-{NODE_2}" is forbidden: node "{NODE_1}" can only delete pods with spec.nodeName set to itself'
        in (refused("delete", "pod", f"on-{NODE_2}", "-n", "default", "--wait=false"))
    )
    assert f'nodes "evil" is forbidden: node "{NODE_1}" is not allowed to modify node "evil"' in refused(
        "create", "-f", str(evil)
    )
    assert f"node '{NODE_1}' cannot read all nodes, only its own Node object" in refused("get", "nodes")
    mine = kubectl.run(kubeconfig, "get", "pods", "-A", f"--field-selector=spec.nodeName={NODE_1}", "-o", "name")
    assert mine.stdout.split() == [f"pod/on-{NODE_1}"], mine.stderr
    can_i = kubectl.run(kubeconfig, "auth", "can-i", "update", f"devices.scheduling.koordinator.sh/{NODE_1}")
    assert can_i.stdout.strip() == "yes"
    can_i = kubectl.run(kubeconfig, "auth", "can-i", "update", f"devices.scheduling.koordinator.sh/{NODE_2}")
    assert can_i.stdout.strip() == "no - can only access devices with the same name as the requesting node"
