"""ElasticQuota charging what ResourceClaims allocate, live: the embedded API server, the scheduler
(ElasticQuota enabled) and the controller (the quotas' status) as real processes, and `tessera
quota` from the command line. A module of its own: the root's total is the cluster's, and other
modules' pods would take it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apis.dra import RESOURCE_CLAIMS, RESOURCE_SLICES, gpus
from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, resources
from scheduler.simulation.cluster import NodeShape
from tests.support.cluster import PodWatch, create_gpu_nodes, create_namespace
from tests.support.draclaims import claim_manifest, claim_pod, create_class, read_claim, scheduling_message
from tests.support.quotas import elastic_quota
from tests.support.waiting import wait_for

GIB = 2**30

pytestmark = pytest.mark.integration


QUOTA_CONFIG = (
    "profiles:\n  - schedulerName: tessera-scheduler\n    plugins: {multiPoint: {enabled: [{name: ElasticQuota}]}}\n"
)


def test_a_quota_charges_what_claims_allocate_and_tessera_quota_shows_it(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    # Our agent's node: the Device CR and the slice of the same GPUs.
    (device,) = create_gpu_nodes(client, "q-dra", shape=NodeShape(gpus=2, gpu_memory=16 * GIB, labels={"pool": "q"}))
    client.resource(RESOURCE_SLICES).create(gpus.gpu_slice(device).to_dict())
    create_class(client, "quota-gpu", gpus.DRIVER)
    ns = create_namespace(client)
    client.resource(names.ELASTIC_QUOTAS).create(
        elastic_quota(ns, namespace=ns, min_gpu="1", max_gpu="1"), namespace=ns
    )
    claims = client.resource(RESOURCE_CLAIMS)
    pods = client.resource(resources.PODS)
    config = work_dir / "config.yaml"
    config.write_text(QUOTA_CONFIG)
    watch = PodWatch(client, ns)
    try:
        with (
            SchedulerProcess(apiserver.kubeconfig, work_dir, extra_args=["--config", str(config)]),
            ControllerProcess(apiserver.kubeconfig, directory=work_dir / "controller"),
        ):
            for name in ("first", "second"):
                claims.create(claim_manifest(name, klass="quota-gpu", capacity={"cores": "100"}), namespace=ns)
            # Under quota (one GPU of one): placed, its claim charged on the pod.
            claim_pod(client, ns, "p-first", "first", pool="q")
            watch.wait_bound(1)
            pod = pods.get("p-first", namespace=ns)
            charge = json.loads(pod["metadata"]["annotations"][names.ANNOTATION_CLAIMS_QUOTA_CHARGE])
            assert charge == {names.GPU_CORE: "100", names.GPU_MEMORY: "16Gi", names.GPU_MEMORY_RATIO: "100"}
            # Over quota: a second whole GPU waits with the quota's reason; its claim stays pending.
            claim_pod(client, ns, "p-second", "second", pool="q")
            watch.wait_for(
                lambda found: any(
                    p.name == "p-second" and "Insufficient quotas, quotaName: " + ns in scheduling_message(p)
                    for p in found
                ),
                "p-second refused by the quota",
            )
            assert read_claim(client, ns, "second").allocation is None
            # `tessera quota` shows the charge in the quota's used (the controller's status.used).
            shown = wait_for(
                lambda: _used_gpu_core(apiserver, ns).get(names.GPU_CORE) and _used_gpu_core(apiserver, ns),
                what="the quota's used written",
                poll_s=1.0,
            )
            assert shown == {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100", names.GPU_MEMORY: "16Gi"}
    finally:
        watch.stop()


def _used_gpu_core(apiserver: EmbeddedAPIServer, ns: str) -> dict[str, str]:
    """The quota's used as `tessera quota -o json` prints it (GPU names only)."""
    command = [sys.executable, "-m", "cli", "quota", "--kubeconfig", str(apiserver.kubeconfig), "-n", ns, "-o", "json"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    (row,) = [q for q in json.loads(result.stdout)["quotas"] if q["name"] == ns]
    used = row.get("used") or {}
    return {k: v for k, v in used.items() if "gpu" in k}
