"""Koordinator's rules for GPU shares, real processes over HTTP: the embedded API server and
`tessera scheduler` with a config that names a templates ConfigMap.

A pod labelled `koordinator.sh/gpu-isolation-provider: HAMi-core` goes only to the HAMi-core
node, and `tessera explain` says why the other node is out; a share that must match a GPU
shared-resource template waits until the ConfigMap has one, then binds; a ConfigMap that does not
parse gets a Warning Event and the last valid templates stay.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, resources
from kube.patch import create_or_replace
from scheduler.simulation.cluster import NodeShape
from tests.support.cluster import (
    PodWatch,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    unique,
    wait_for_event,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
HAMI = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}
HALF = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
THIRD = {names.GPU_CORE: "30", names.GPU_MEMORY_RATIO: "30"}
TEMPLATES = "gpu-templates"


class Cluster:
    def __init__(self, client: Client, scheduler: SchedulerProcess, namespace: str, hami: str, plain: str) -> None:
        self.client = client
        self.scheduler = scheduler
        self.namespace = namespace
        self.hami = hami
        self.plain = plain
        self.watch = PodWatch(client, namespace)


@pytest.fixture(scope="module")
def cluster(
    apiserver: EmbeddedAPIServer, module_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    hami, plain = unique("hami"), unique("plain")
    create_gpu_nodes(module_client, hami, shape=NodeShape(gpus=2, labels={names.LABEL_GPU_VENDOR: "nvidia", **HAMI}))
    create_gpu_nodes(module_client, plain, shape=NodeShape(gpus=2, labels={names.LABEL_GPU_VENDOR: "nvidia"}))
    namespace = create_namespace(module_client)
    work = tmp_path_factory.mktemp("share")
    config = work / "scheduler.yaml"
    config.write_text(
        f"""
profiles:
  - schedulerName: tessera-scheduler
    pluginConfig:
      - name: DeviceShare
        args:
          gpuSharedResourceTemplatesConfig:
            configMapNamespace: {namespace}
            configMapName: {TEMPLATES}
            matchedResources: [{names.GPU_MEMORY_RATIO}]
"""
    )
    scheduler = SchedulerProcess(apiserver.kubeconfig, work, extra_args=["--config", str(config)])
    scheduler.start()
    c = Cluster(module_client, scheduler, namespace, hami, plain)
    try:
        templates_for(c, {"half": HALF})
        yield c
        c.watch.stop()
    finally:
        scheduler.stop()


def templates_for(cluster: Cluster, templates: dict[str, dict[str, str]], *, raw: str | None = None) -> None:
    """Create or replace the templates ConfigMap with `templates` for the nodes' A100s."""
    lines = [f"  {name}: {{{', '.join(f'{k}: {v}' for k, v in share.items())}}}" for name, share in templates.items()]
    data = raw if raw is not None else "nvidia-A100-SXM4-80GB:\n" + "\n".join(lines) + "\n"
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TEMPLATES, "namespace": cluster.namespace},
        "data": {"data.yaml": data},
    }
    create_or_replace(cluster.client.resource(resources.CONFIG_MAPS), manifest, namespace=cluster.namespace)


def unschedulable_message(cluster: Cluster, name: str) -> str:
    pods = cluster.watch.wait_for(
        lambda pods: any(p.name == name and (condition(p) or ("",))[0] == "False" for p in pods),
        f"{name} to be reported unschedulable",
    )
    return (condition(next(p for p in pods if p.name == name)) or ("", "", ""))[2]


def test_a_hami_core_share_goes_to_the_hami_core_node(cluster: Cluster) -> None:
    create_pod(cluster.client, cluster.namespace, "isolated", HALF, labels=HAMI)
    (pod,) = cluster.watch.wait_bound(1)
    assert pod.node_name == cluster.hami


def test_a_share_asking_for_a_provider_no_node_has_is_explained(cluster: Cluster) -> None:
    other = {names.LABEL_GPU_ISOLATION_PROVIDER: "vGPU-X"}
    create_pod(cluster.client, cluster.namespace, "other-provider", HALF, labels=other)
    message = unschedulable_message(cluster, "other-provider")
    assert message.startswith("0/2 nodes are available: 1 GPU isolation provider vGPU-X not found on the node")
    explained = subprocess.run(
        [sys.executable, "-m", "cli", "explain", "other-provider", "-n", cluster.namespace],
        cwd=ROOT,
        env={"TESSERA_SCHEDULER_ADDRESS": cluster.scheduler.grpc_address, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert explained.returncode == 0, explained.stderr
    by_node = {line.split()[0]: " ".join(line.split()[1:]) for line in explained.stdout.splitlines() if "  " in line}
    why = (
        "DeviceShare: GPU isolation provider vGPU-X not found on the node "
        "(pod label koordinator.sh/gpu-isolation-provider=vGPU-X"
    )
    assert by_node[cluster.plain] == f"{why}, node label: none)"
    assert by_node[cluster.hami] == f"{why}, node label: HAMi-core)"


def test_a_share_waits_for_a_template_and_binds_once_the_configmap_has_one(cluster: Cluster) -> None:
    create_pod(cluster.client, cluster.namespace, "third", THIRD)
    assert "no matched GPU shared resource template" in unschedulable_message(cluster, "third")
    templates_for(cluster, {"half": HALF, "third": THIRD})
    cluster.watch.wait_for(lambda pods: any(p.name == "third" and p.node_name for p in pods), "third to bind")


def test_templates_that_do_not_parse_are_reported_and_the_last_valid_ones_stay(cluster: Cluster) -> None:
    templates_for(cluster, {}, raw="nvidia-A100-SXM4-80GB: [not, a, map]\n")
    events = wait_for_event(cluster.client, cluster.namespace, TEMPLATES, "InvalidGPUSharedResourceTemplates")
    assert "expected a map of template name to resources" in events[0]["message"]
    create_pod(cluster.client, cluster.namespace, "another-half", HALF)
    cluster.watch.wait_for(lambda pods: any(p.name == "another-half" and p.node_name for p in pods), "it to bind")
