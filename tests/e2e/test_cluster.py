"""The system end to end, as a user meets it: `tessera up` with three simulated 8-GPU nodes (and
this machine), 30 pods with mixed requests through the official client, `kubectl`, `tessera
explain`, a GPU failing, and — where containerd can run — a container that sees its GPUs.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from apis.crds.device import DeviceType
from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.agent import AgentProcess
from cli.launchers.runtimeproxy import RuntimeProxyProcess
from runtimeproxy import ProxySettings
from runtimeproxy.hookconfig import HookType
from tests.e2e.checks import allocatable_problems, allocation_problems, gpus_of
from tests.e2e.workloads import MIXED, UNSCHEDULABLE, manifests
from tests.support import containerd, sockets
from tests.support.cluster import unique
from tests.support.up import Cluster, Up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 180.0  # a loaded 2-core machine; the waits end as soon as their condition holds


def simulated_nodes(up: Up) -> list[str]:
    return sorted(c.node for c in up.state().components.values() if c.node.startswith("sim-"))


def converged(cluster: Cluster) -> bool:
    return not allocatable_problems(cluster.nodes(), cluster.devices())


def test_every_node_is_ready_and_offers_its_healthy_devices(up: Up, cluster: Cluster) -> None:
    expected = {c.node for c in up.state().components.values() if c.node}
    assert len(expected) == 4  # three simulated nodes and this machine
    wait_for(
        lambda: (
            {n.name for n in cluster.nodes().values() if n.ready} == expected
            and set(simulated_nodes(up)) <= set(cluster.devices())
            and converged(cluster)
        ),
        timeout_s=TIMEOUT_S,
        what="every node Ready with its Device CR turned into allocatable",
    )
    listed = json.loads(up.kubectl("get", "nodes", "-o", "json"))
    assert {n["metadata"]["name"] for n in listed["items"]} == expected
    devices = json.loads(up.kubectl("get", "devices", "-o", "json"))["items"]
    simulated = [d for d in devices if d["metadata"]["name"].startswith("sim-")]
    assert [sum(1 for x in d["spec"]["devices"] if x["type"] == "gpu") for d in simulated] == [8, 8, 8]
    for node in simulated_nodes(up):
        assert cluster.nodes()[node].allocatable[names.GPU_CORE] == 800


def test_thirty_mixed_pods_are_placed_on_devices_without_overcommit(up: Up, cluster: Cluster) -> None:
    namespace = unique("mixed")
    cluster.create_namespace(namespace)
    cluster.create_pods(namespace, manifests(MIXED))
    assert len(MIXED) == 30

    def settled() -> list[Pod] | None:
        pods = {p.name: p for p in cluster.pods(namespace)}
        others = [p for name, p in pods.items() if name != UNSCHEDULABLE]
        if len(others) == 29 and all(p.phase == "Running" for p in others) and pods[UNSCHEDULABLE].pending_message:
            return list(pods.values())
        return None

    pods = wait_for(settled, timeout_s=TIMEOUT_S, what="29 pods Running and the 30th unschedulable")
    assert allocation_problems(cluster.pods(), cluster.devices()) == []
    assert converged(cluster)
    too_big = next(p for p in pods if p.name == UNSCHEDULABLE)
    assert not too_big.node_name
    assert "0/4 nodes are available" in too_big.pending_message
    assert "Insufficient gpu devices" in too_big.pending_message
    explanation = up.tessera("explain", UNSCHEDULABLE, "-n", namespace)
    assert f"Pod {namespace}/{UNSCHEDULABLE}: pending" in explanation
    assert "Insufficient gpu devices" in explanation
    assert "needs 16" in explanation  # what the nearest node lacks
    running = json.loads(up.kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
    assert sorted(p["status"]["phase"] for p in running).count("Running") == 29


def _holders(cluster: Cluster, node: str) -> set[int]:
    return {minor for p in cluster.pods() if p.node_name == node for minor in gpus_of(p)}


def _inject_xid(up: Up, node: str, minor: int, xid: int) -> None:
    query = urllib.parse.urlencode({"minor": minor, "xid": xid})
    status, body = up.ask(f"agent/{node}", "POST", f"/debug/simulate/xid?{query}")
    assert status == 200, body


def test_an_unhealthy_gpu_leaves_allocatable_and_new_pods_avoid_it(up: Up, cluster: Cluster) -> None:
    wait_for(lambda: converged(cluster), timeout_s=TIMEOUT_S, what="allocatable to match the Device CRs")
    # A GPU nobody holds, on the node with the most such GPUs: without the fault it could be chosen.
    free = {node: sorted(set(range(8)) - _holders(cluster, node)) for node in simulated_nodes(up)}
    node = max(free, key=lambda n: len(free[n]))
    broken = free[node][0]
    assert len(free[node]) >= 2, f"too few free GPUs to test with: {free}"
    before = cluster.nodes()[node].allocatable[names.GPU_CORE]

    _inject_xid(up, node, broken, xid=79)

    def unhealthy() -> bool:
        gpu = next(d for d in cluster.devices()[node].of_type(DeviceType.GPU) if d.minor == broken)
        return not gpu.health

    wait_for(unhealthy, timeout_s=TIMEOUT_S, what=f"GPU {broken} of {node} unhealthy in its Device CR")
    wait_for(
        lambda: cluster.nodes()[node].allocatable[names.GPU_CORE] == before - 100 and converged(cluster),
        timeout_s=TIMEOUT_S,
        what=f"allocatable of {node} to drop by one GPU",
    )

    # Fill the node with whole-GPU pods: every healthy free GPU is taken, the broken one is not.
    healthy_free = [m for m in free[node] if m != broken]
    namespace = unique("after-fault")
    cluster.create_namespace(namespace)
    workload = tuple((f"gpu-{i}", {names.NVIDIA_GPU: "1"}, {}) for i in range(len(healthy_free) + 1))
    cluster.create_pods(namespace, manifests(workload, node_selector={names.LABEL_HOSTNAME: node}))

    def settled() -> list[Pod] | None:
        pods = cluster.pods(namespace)
        bound = [p for p in pods if p.node_name]
        waiting = [p for p in pods if not p.node_name and p.pending_message]
        return pods if len(bound) == len(healthy_free) and len(waiting) == 1 else None

    pods = wait_for(settled, timeout_s=TIMEOUT_S, what=f"{len(healthy_free)} pods bound on {node}, one pending")
    taken = sorted(m for p in pods for m in gpus_of(p))
    assert taken == healthy_free, f"GPU {broken} is unhealthy; pods got {taken}"
    assert allocation_problems(cluster.pods(), cluster.devices()) == []


# --- containerd: the runtime proxy injects what the scheduler decided -------------------------------------
@contextlib.contextmanager
def node_behind_proxy(
    up: Up, ctrd: containerd.Containerd, *, profile: str = "t4-2x", agent_args: tuple[str, ...] = ()
) -> Iterator[tuple[str, Path]]:
    """A node joined to the cluster the way a GPU node runs: an agent (simulated GPUs, since this
    machine has none) whose hook server a real `tessera runtime-proxy` calls, in front of a
    private containerd. Yields (node name, the proxy's socket), where kubelet would connect."""
    node = unique("proxy-node")
    with sockets.temporary("tessera-e2e-node-") as workdir:
        agent = AgentProcess(
            up.kubeconfig,
            node_name=node,
            directory=workdir / "agent",
            args=["--simulate-devices", profile, "--simulate-kubelet", "--qos", "off", *agent_args],
        )
        hooks = workdir / "hooks"
        hooks.mkdir()
        registration = {
            "remote-endpoint": str(agent.hook_socket),
            "failure-policy": "Fail",
            "runtime-hooks": [h.value for h in HookType],
        }
        (hooks / "agent.json").write_text(json.dumps(registration))
        settings = ProxySettings(listen=workdir / "proxy.sock", runtime_endpoint=ctrd.address, hook_config_dir=hooks)
        proxy = RuntimeProxyProcess(settings, log_path=workdir / "proxy.log")
        with agent:
            proxy.start()
            try:
                yield node, settings.listen
            finally:
                assert proxy.stop() == 0, proxy.log_tail()


@pytest.fixture
def proxy_node(up: Up, ctrd: containerd.Containerd) -> Iterator[tuple[str, Path]]:
    with node_behind_proxy(up, ctrd) as found:
        yield found


def run_through_proxy(pod: Pod, proxy_socket: Path, ctrd: containerd.Containerd, *commands: list[str]) -> list[str]:
    """Play kubelet through the proxy with the pod as the API server has it: run it, and what
    each command printed in its container (`env` first: the container's environment)."""
    with containerd.CRIClient(f"unix://{proxy_socket}", cgroup_parent=ctrd.cgroup_parent) as kubelet:
        config = kubelet.pod_config(
            pod.name, namespace=pod.namespace, uid=pod.uid, annotations=pod.annotations, labels=pod.labels
        )
        sandbox = kubelet.run_pod(config)
        try:
            container = kubelet.run_container(sandbox, config, "main")
            return [kubelet.exec_sync(container, command).stdout for command in commands]
        finally:
            kubelet.remove_pod(sandbox)


@pytest.mark.root
def test_the_runtime_proxy_gives_the_container_the_gpus_the_scheduler_chose(
    up: Up, cluster: Cluster, ctrd: containerd.Containerd, proxy_node: tuple[str, Path]
) -> None:
    node, proxy_socket = proxy_node
    namespace = unique("containerd")
    cluster.create_namespace(namespace)
    cluster.create_pods(
        namespace,
        manifests((("cuda", {names.NVIDIA_GPU: "1"}, {}),), node_selector={names.LABEL_HOSTNAME: node}),
    )
    pod = wait_for(
        lambda: next((p for p in cluster.pods(namespace) if p.node_name == node), None),
        timeout_s=TIMEOUT_S,
        what=f"the pod bound to {node}",
    )
    minors = gpus_of(pod)
    assert len(minors) == 1

    (printed,) = run_through_proxy(pod, proxy_socket, ctrd, ["env"])
    env = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
    assert env["NVIDIA_VISIBLE_DEVICES"] == ",".join(str(m) for m in minors)


HAMI = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}
STAND_IN = "hami-core stand-in"


@pytest.fixture
def hami_core_node(up: Up, ctrd: containerd.Containerd) -> Iterator[tuple[str, Path, Path]]:
    """A node behind the proxy with HAMi-core installed: its simulated profile says so (the Node
    gets the provider label through the Device CR and the controller), and a stand-in library
    file is where its agent preloads it from. Yields (node, the proxy's socket, the library)."""
    with sockets.temporary("tessera-e2e-hami-") as files:
        profile = files / "t4-hami.yaml"
        profile.write_text(
            "isolationProvider: HAMi-core\n"
            "gpu: {name: Tesla T4, memory: 15Gi}\n"
            "numaNodes: [{cpus: 0-15, pcieRoots: [{root: pci0000:00, gpus: ['0000:00:04.0', '0000:00:05.0']}]}]\n"
        )
        library = files / "vgpu" / "libvgpu.so"
        library.parent.mkdir()
        library.write_text(STAND_IN)
        args = ("--hami-core-library-directory-path", str(library), "--hami-core-lock-dir", str(files / "vgpulock"))
        with node_behind_proxy(up, ctrd, profile=str(profile), agent_args=args) as (node, proxy_socket):
            yield node, proxy_socket, library


@pytest.mark.root
def test_a_hami_core_share_is_isolated_on_the_node_that_has_it(
    up: Up, cluster: Cluster, ctrd: containerd.Containerd, hami_core_node: tuple[str, Path, Path]
) -> None:
    node, proxy_socket, library = hami_core_node

    def labelled() -> bool:
        found = cluster.nodes().get(node)
        return found is not None and found.labels.get(names.LABEL_GPU_ISOLATION_PROVIDER) == "HAMi-core"

    wait_for(labelled, timeout_s=TIMEOUT_S, what=f"{node} labelled with its isolation provider")
    namespace = unique("hami")
    cluster.create_namespace(namespace)
    (manifest,) = manifests((("infer", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, {}),))
    manifest["metadata"]["labels"].update(HAMI)  # the only HAMi-core node: the simulated ones lack the label
    cluster.create_pods(namespace, [manifest])
    pod = wait_for(
        lambda: next((p for p in cluster.pods(namespace) if p.node_name), None),
        timeout_s=TIMEOUT_S,
        what="the HAMi-core pod bound",
    )
    assert pod.node_name == node
    printed_env, mounts, preloaded = run_through_proxy(
        pod, proxy_socket, ctrd, ["env"], ["cat", "/proc/self/mounts"], ["cat", str(library)]
    )
    env = dict(line.split("=", 1) for line in printed_env.splitlines() if "=" in line)
    (gpu,) = gpus_of(pod)
    assert (env["NVIDIA_VISIBLE_DEVICES"], env["CUDA_DEVICE_SM_LIMIT"], env["LD_PRELOAD"]) == (
        str(gpu),
        "50",
        str(library),
    )
    assert env["CUDA_DEVICE_MEMORY_LIMIT"] == env["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(15 * 2**30 // 2)
    assert {str(library), "/tmp/vgpulock"} <= {line.split()[1] for line in mounts.splitlines()}
    assert preloaded == STAND_IN


QUOTAS = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: e2e-org
  namespace: default
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
spec:
  min: {nvidia.com/gpu: "2"}
  max: {nvidia.com/gpu: "8"}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: e2e-team
  namespace: default
  labels: {quota.scheduling.koordinator.sh/parent: e2e-org}
spec:
  min: {nvidia.com/gpu: "4"}
  max: {nvidia.com/gpu: "8"}
"""


def test_kubectl_apply_of_a_quota_that_breaks_the_tree_is_refused(up: Up) -> None:
    out = up.kubectl("apply", "-f", "-", stdin=QUOTAS, check=False)
    try:
        assert "elasticquota.scheduling.sigs.k8s.io/e2e-org created" in out
        assert (
            'admission webhook "velasticquota.koordinator.sh" denied the request: '
            "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: e2e-org "
            "(quota e2e-org: children's min[nvidia.com/gpu] sum to 4, more than its min[nvidia.com/gpu] 2 "
            "(children: e2e-team))"
        ) in out
        assert "e2e-team" not in up.kubectl("get", "elasticquotas", "-n", "default", "-o", "name")
    finally:
        up.kubectl("delete", "elasticquota", "e2e-org", "-n", "default", "--ignore-not-found")


# --- one identity per node, authenticated endpoints (docs/security.md) ------------------------------------------
def test_an_agents_credentials_cannot_touch_another_nodes_objects(up: Up, cluster: Cluster, tmp_path: Path) -> None:
    """The findings of issue 33, replayed with sim-1's agent's own kubeconfig and the real kubectl."""
    sim_1, sim_2 = simulated_nodes(up)[:2]
    agent = up.data_dir / "kubeconfigs" / f"node-{sim_1}.kubeconfig"
    wait_for(lambda: sim_2 in cluster.devices(), timeout_s=TIMEOUT_S, what=f"the Device CR of {sim_2}")
    theirs = json.loads(up.kubectl("get", "device", sim_2, "-o", "json"))
    theirs["spec"]["devices"][0]["health"] = False
    (tmp_path / "device.json").write_text(json.dumps(theirs))
    node = json.loads(up.kubectl("get", "node", sim_2, "-o", "json"))
    node["status"]["allocatable"][names.GPU_CORE] = "99999"
    (tmp_path / "node.json").write_text(json.dumps(node))
    (tmp_path / "new-node.json").write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}}))
    namespace = unique("identity")
    cluster.create_namespace(namespace)
    (victim,) = manifests((("on-sim-2", {names.CPU: "100m"}, {}),))
    victim["spec"]["nodeName"] = sim_2
    cluster.create_pods(namespace, [victim])
    health_before = cluster.devices()[sim_2].of_type(DeviceType.GPU)[0].health
    me = f'User "system:node:{sim_1}"'

    def refused(*args: str) -> str:
        out = up.kubectl(f"--kubeconfig={agent}", *args, check=False)
        assert "forbidden" in out, out
        return out

    assert (
        f'devices.scheduling.koordinator.sh "{sim_2}" is forbidden: {me} cannot update resource "devices" in API '
        f'group "scheduling.koordinator.sh" at the cluster scope: can only access devices with the same name as '
        "the requesting node"
    ) in refused("replace", "-f", str(tmp_path / "device.json"))
    assert f'nodes "{sim_2}" is forbidden: node "{sim_1}" is not allowed to modify node "{sim_2}"' in refused(
        "replace", "--raw", f"/api/v1/nodes/{sim_2}/status", "-f", str(tmp_path / "node.json")
    )
    assert (
        f'pods "on-sim-2" is forbidden: node "{sim_1}" can only delete pods with spec.nodeName set to itself'
    ) in refused("delete", "pod", "on-sim-2", "-n", namespace, "--wait=false")
    assert f'nodes "x" is forbidden: node "{sim_1}" is not allowed to modify node "x"' in refused(
        "create", "-f", str(tmp_path / "new-node.json")
    )
    assert cluster.devices()[sim_2].of_type(DeviceType.GPU)[0].health is health_before
    assert cluster.nodes()[sim_2].allocatable[names.GPU_CORE] != 99999
    assert [p.name for p in cluster.pods(namespace) if not p.is_deleting] == ["on-sim-2"]
    cluster.delete_namespace(namespace)
    assert up.forbidden_calls() == [], "a component (an agent as its node, too) was refused a call it makes"


def test_the_agents_and_the_schedulers_endpoints_refuse_anonymous_callers(up: Up) -> None:
    agent = f"agent/{simulated_nodes(up)[0]}"
    for component, method, path in (
        (agent, "POST", "/health/clear?minor=0"),
        (agent, "POST", "/debug/simulate/xid?minor=0&xid=79"),
        (agent, "GET", "/metrics"),
        ("scheduler", "PUT", "/debug/flags/v"),
        ("scheduler", "GET", "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries"),
    ):
        status, body = up.ask(component, method, path, body=b"5", anonymous=True)
        verb, where = method.lower(), path.split("?")[0]
        assert (status, json.loads(body)["message"]) == (
            403,
            f'forbidden: User "system:anonymous" cannot {verb} path "{where}"',
        ), (component, path)
    assert up.ask(agent, "GET", "/healthz", anonymous=True) == (200, b"ok\n")
    # The user (cluster-admin) may; and so may the scraper's token, for /metrics only.
    assert up.ask("scheduler", "PUT", "/debug/flags/v", body=b"2")[0] == 200
    scraper = (up.data_dir / "metrics-token").read_text().strip()
    url = up.state().components["scheduler"].url
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {scraper}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert "tessera_scheduler_" in answer.read().decode()


# --- GPU partitions on an H100-class node ---------------------------------------------------------------
H100_AGENT = ("--simulate-devices", "h100-8x", "--simulate-kubelet", "--qos", "off", "--gpu-partition-policy", "Honor")


def _bound(cluster: Cluster, namespace: str, name: str) -> Pod | None:
    return next((p for p in cluster.pods(namespace) if p.name == name and p.node_name), None)


def _reported(cluster: Cluster, namespace: str, name: str) -> Pod | None:
    return next((p for p in cluster.pods(namespace) if p.name == name and p.pending_message), None)


def test_multi_gpu_pods_on_an_h100_node_get_the_partitions_koordinators_table_permits(up: Up, cluster: Cluster) -> None:
    """An H100 node joins (its agent writes Koordinator's Hopper partition table on the Device,
    labelled Honor by its flag): 4 then 2 GPUs get partitions of the table, by its bin-packing;
    3 GPUs, no partition of the table, never fit there, and `tessera explain` says why."""
    node = unique("h100-node")
    pinned = {names.LABEL_HOSTNAME: node}
    with (
        sockets.temporary("tessera-e2e-h100-") as workdir,
        AgentProcess(up.kubeconfig, node_name=node, directory=workdir / "agent", args=H100_AGENT),
    ):

        def offered() -> bool:
            found, device = cluster.nodes().get(node), cluster.devices().get(node)
            return (
                found is not None
                and found.allocatable.get(names.GPU_CORE, 0) == 800
                and device is not None
                and device.gpu_partitions is not None
            )

        wait_for(offered, timeout_s=TIMEOUT_S, what=f"{node} offering 8 GPUs with its partition table")
        assert cluster.devices()[node].meta.labels[names.LABEL_GPU_PARTITION_POLICY] == "Honor"
        namespace = unique("partitions")
        cluster.create_namespace(namespace)
        try:
            for name, gpus, want in (("four", "4", [0, 1, 2, 3]), ("two", "2", [4, 5])):
                pod_manifests = manifests(((name, {names.NVIDIA_GPU: gpus}, {}),), node_selector=pinned)
                cluster.create_pods(namespace, pod_manifests)
                pod = wait_for(
                    lambda name=name: _bound(cluster, namespace, name), timeout_s=TIMEOUT_S, what=f"{name} bound"
                )
                assert (pod.node_name, sorted(gpus_of(pod))) == (node, want)
            cluster.create_pods(namespace, manifests((("three", {names.NVIDIA_GPU: "3"}, {}),), node_selector=pinned))
            pending = wait_for(
                lambda: _reported(cluster, namespace, "three"), timeout_s=TIMEOUT_S, what="three unschedulable"
            )
            assert "node(s) Unsupported number of GPU requests" in pending.pending_message
            explanation = up.tessera("explain", "three", "-n", namespace)
            assert "node(s) Unsupported number of GPU requests" in explanation
            assert "hold 1, 2, 4, 8 GPUs, not 3" in explanation
            assert allocation_problems(cluster.pods(), cluster.devices()) == []
        finally:
            cluster.delete_namespace(namespace)
