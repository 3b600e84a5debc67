"""Deployments, StatefulSets and Jobs in `tessera up`, as a user drives them: the real kubectl and
the official client against the embedded API server, `tessera kube-controller-manager` running
the workloads and the simulated kubelet running their pods (Jobs' pods exit after their run time).

Each test works in a namespace of its own on one `tessera up`.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.support.cluster import unique
from tests.support.up import Cluster, Up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 120.0


@pytest.fixture
def namespace(up: Up, cluster: Cluster) -> str:
    name = unique("wl")
    cluster.create_namespace(name)
    return name


def apply(up: Up, directory: Path, manifest: dict[str, Any], namespace: str) -> str:
    """`kubectl apply -f` of `manifest` as a file, as a user applies one."""
    path = directory / f"{manifest['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return up.kubectl("apply", "-f", str(path), "-n", namespace)


def active_pods(cluster: Cluster, namespace: str, selector: str) -> list[Any]:
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase not in ("Succeeded", "Failed")]


def running_ready(cluster: Cluster, namespace: str, selector: str, count: int) -> list[Any] | None:
    pods = active_pods(cluster, namespace, selector)
    ready = [p for p in pods if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())]
    return pods if len(pods) == count and len(ready) == count else None


def test_deployment_create_rollout_scale_and_delete_with_kubectl(up: Up, cluster: Cluster, namespace: str) -> None:
    ns = ("-n", namespace)
    assert "deployment.apps/web created" in up.kubectl(
        "create", "deployment", "web", "--image=nginx:1.25", "--replicas=2", *ns
    )
    up.kubectl("rollout", "status", "deployment/web", "--timeout=120s", *ns)
    listing = up.kubectl("get", "all", *ns)
    assert "deployment.apps/web   2/2" in listing and "replicaset.apps/web-" in listing
    up.kubectl("set", "image", "deployment/web", "nginx=nginx:1.27", *ns)
    assert "successfully rolled out" in up.kubectl("rollout", "status", "deployment/web", "--timeout=120s", *ns)
    sets = yaml.safe_load(up.kubectl("get", "replicasets", "-o", "yaml", *ns))["items"]
    assert sorted(s["spec"]["replicas"] for s in sets) == [0, 2]
    assert sorted(s["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for s in sets) == ["1", "2"]
    up.kubectl("scale", "deployment", "web", "--replicas=4", *ns)
    up.kubectl("rollout", "status", "deployment/web", "--timeout=120s", *ns)
    pods = wait_for(lambda: running_ready(cluster, namespace, "app=web", 4), timeout_s=TIMEOUT_S, what="4 web pods")
    assert all(p.spec.containers[0].image == "nginx:1.27" for p in pods)
    wait_for(
        lambda: "Scaled up replica set web-" in up.kubectl("describe", "deployment", "web", *ns),
        timeout_s=TIMEOUT_S,
        what="the Deployment's ScalingReplicaSet events",
    )
    assert "deleted" in up.kubectl("delete", "deployment", "web", "--cascade=foreground", *ns)  # waits until gone
    assert up.kubectl("get", "replicasets,pods", "-o", "name", *ns).strip() == ""


def test_orphan_and_background_cascades(up: Up, cluster: Cluster, namespace: str) -> None:
    ns = ("-n", namespace)
    up.kubectl("create", "deployment", "keep", "--image=nginx", *ns)
    up.kubectl("rollout", "status", "deployment/keep", "--timeout=120s", *ns)
    up.kubectl("delete", "deployment", "keep", "--cascade=orphan", *ns)
    kept = json.loads(up.kubectl("get", "replicasets", "-o", "json", *ns))["items"]
    assert len(kept) == 1 and not kept[0]["metadata"].get("ownerReferences")
    up.kubectl("delete", "replicaset", kept[0]["metadata"]["name"], *ns)  # background: its pods follow
    wait_for(lambda: not cluster.core.list_namespaced_pod(namespace).items, timeout_s=TIMEOUT_S, what="the pods to go")


def test_a_job_completes_and_a_failing_one_stops_at_its_backoff_limit(up: Up, namespace: str, tmp_path: Path) -> None:
    ns = ("-n", namespace)
    assert "job.batch/train created" in up.kubectl("create", "job", "train", "--image=busybox", *ns)
    up.kubectl("wait", "--for=condition=complete", "job/train", "--timeout=120s", *ns)
    assert "Complete   1/1" in up.kubectl("get", "jobs", *ns)
    assert "Completed" in up.kubectl("get", "pods", "-l", "job-name=train", *ns)
    wait_for(
        lambda: "Job completed" in up.kubectl("describe", "job", "train", *ns),
        timeout_s=TIMEOUT_S,
        what="the Job's Completed event",
    )
    failing = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "broken"},
        "spec": {
            "backoffLimit": 1,
            "template": {
                "metadata": {
                    "annotations": {"tessera.dev/simulated-run-seconds": "0.5", "tessera.dev/simulated-exit-code": "2"}
                },
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    apply(up, tmp_path, failing, namespace)
    up.kubectl("wait", "--for=condition=failed", "job/broken", "--timeout=120s", *ns)
    job = json.loads(up.kubectl("get", "job", "broken", "-o", "json", *ns))
    assert job["status"]["failed"] == 2
    assert any(c["reason"] == "BackoffLimitExceeded" for c in job["status"]["conditions"])


def test_a_statefulset_starts_its_pods_in_order(up: Up, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "main", "image": "postgres:16"}]},
            },
        },
    }
    apply(up, tmp_path, sts, namespace)
    up.kubectl("rollout", "status", "statefulset/db", "--timeout=120s", "-n", namespace)
    pods = sorted(cluster.core.list_namespaced_pod(namespace).items, key=lambda p: p.metadata.creation_timestamp)
    assert [p.metadata.name for p in pods] == ["db-0", "db-1", "db-2"]


def test_an_evicted_pod_is_replaced_and_a_budget_refuses_with_429(
    up: Up, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    ns = ("-n", namespace)
    up.kubectl("create", "deployment", "infer", "--image=vllm", "--replicas=3", *ns)
    pods = wait_for(lambda: running_ready(cluster, namespace, "app=infer", 3), timeout_s=TIMEOUT_S, what="3 pods")
    budget = {  # as a policy/v1 manifest: kubectl 1.20's `create pdb` writes policy/v1beta1, which 1.25+ do not serve
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "infer"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "infer"}}},
    }
    apply(up, tmp_path, budget, namespace)
    victim = pods[0].metadata.name
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim}}
    with pytest.raises(kubernetes.client.ApiException) as refused:
        cluster.core.create_namespaced_pod_eviction(victim, namespace, eviction)
    assert refused.value.status == 429
    assert (
        json.loads(refused.value.body)["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    )
    wait_for(
        lambda: (
            up.kubectl("get", "pdb", "infer", "-o", "jsonpath={.status.disruptionsAllowed}", *ns).strip() == "0"
            and up.kubectl("get", "pdb", "infer", "-o", "jsonpath={.status.currentHealthy}", *ns).strip() == "3"
        ),
        timeout_s=TIMEOUT_S,
        what="the budget's status",
    )
    up.kubectl("patch", "pdb", "infer", "--type=merge", "-p", '{"spec":{"minAvailable":2}}', *ns)
    cluster.core.create_namespaced_pod_eviction(victim, namespace, eviction)
    after = wait_for(
        lambda: running_ready(cluster, namespace, "app=infer", 3), timeout_s=TIMEOUT_S, what="a replacement pod"
    )
    assert victim not in {p.metadata.name for p in after}


def _watch_active(cluster: Cluster, namespace: str, selector: str, stop: threading.Event) -> Iterator[int]:
    while not stop.is_set():
        yield len(active_pods(cluster, namespace, selector))


def test_killed_mid_rollout_the_controllers_resume_without_duplicate_pods(
    up: Up, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    ns = ("-n", namespace)
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "roll"},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "roll"}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "roll"}},
                "spec": {"containers": [{"name": "main", "image": "app:1"}]},
            },
        },
    }
    apply(up, tmp_path, deploy, namespace)
    up.kubectl("rollout", "status", "deployment/roll", "--timeout=120s", *ns)
    most: list[int] = []
    stop = threading.Event()
    sampler = threading.Thread(target=lambda: most.extend(_watch_active(cluster, namespace, "app=roll", stop)))
    sampler.start()
    try:
        up.kubectl("set", "image", "deployment/roll", "main=app:2", *ns)
        pid = up.state().components["kube-controller-manager"].pid
        wait_for(
            lambda: len(active_pods(cluster, namespace, "app=roll")) > 6,
            timeout_s=TIMEOUT_S,
            what="the rollout to start",
        )
        os.kill(pid, signal.SIGKILL)
        up.wait_restarted("kube-controller-manager", pid)
        up.kubectl("rollout", "status", "deployment/roll", "--timeout=120s", *ns)
    finally:
        stop.set()
        sampler.join()
    assert max(most) <= 7  # replicas + maxSurge, even across the kill
    pods = wait_for(lambda: running_ready(cluster, namespace, "app=roll", 6), timeout_s=TIMEOUT_S, what="6 pods")
    assert all(p.spec.containers[0].image == "app:2" for p in pods)
    sets = json.loads(up.kubectl("get", "replicasets", "-o", "json", *ns))["items"]
    assert len(sets) == 2  # one per template: none made twice


# --- Dynamic Resource Allocation: the resourceclaim controller ----------------------------------

DRA_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
spec:
  metadata:
    labels: {team: ml}
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.tessera.dev
            selectors:
              - cel:
                  expression: device.attributes["gpu.tessera.dev"].productName.startsWith("NVIDIA")
"""
DRA_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  resourceClaims:
    - name: gpu
      resourceClaimTemplateName: one-gpu
  containers:
    - name: main
      image: busybox
      resources:
        claims:
          - name: gpu
"""


def test_a_pods_claim_template_gets_a_claim_owned_by_the_pod_and_removed_with_it(
    up: Up, cluster: Cluster, namespace: str
) -> None:
    ns = ("-n", namespace)
    root = Path(__file__).resolve().parents[2]
    up.kubectl("apply", "--server-side", "-f", str(root / "deploy" / "dra" / "deviceclasses.yaml"))
    assert "gpu.tessera.dev" in up.kubectl("get", "deviceclasses")
    up.kubectl("apply", "--server-side", "-f", "-", *ns, stdin=DRA_TEMPLATE)
    up.kubectl("apply", "--server-side", "-f", "-", *ns, stdin=DRA_POD)

    def recorded() -> str:
        out = up.kubectl(
            "get", "pod", "trainer", *ns, "-o", "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}"
        )
        return out.strip()

    name = wait_for(recorded, timeout_s=TIMEOUT_S, what="the claim recorded in the pod's status")
    claim = json.loads(up.kubectl("get", "resourceclaim", name, *ns, "-o", "json"))
    pod_uid = up.kubectl("get", "pod", "trainer", *ns, "-o", "jsonpath={.metadata.uid}")
    assert name.startswith("trainer-gpu-")
    assert claim["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "trainer",
            "uid": pod_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert claim["metadata"]["labels"] == {"team": "ml"}
    request = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert (request["allocationMode"], request["count"]) == ("ExactCount", 1), "kube-apiserver's defaults"
    listed = up.kubectl("get", "resourceclaims", *ns)
    assert listed.split("\n")[0].split() == ["NAME", "STATE", "AGE"] and name in listed
    assert "requests" in up.kubectl("explain", "resourceclaim.spec.devices")

    up.kubectl("delete", "pod", "trainer", *ns, "--wait=false")
    wait_for(
        lambda: name not in up.kubectl("get", "resourceclaims", *ns),
        timeout_s=TIMEOUT_S,
        what="the generated claim deleted with its pod",
    )


@pytest.mark.parametrize(
    ("manifest", "error"),
    [
        (
            DRA_POD.replace(
                "      resourceClaimTemplateName: one-gpu\n",
                "      resourceClaimTemplateName: one-gpu\n    - name: gpu\n      resourceClaimName: shared\n",
            ),
            'spec.resourceClaims[1].name: Duplicate value: "gpu"',
        ),
        (
            DRA_POD.replace("        claims:\n          - name: gpu", "        claims:\n          - name: nic"),
            'spec.containers[0].resources.claims[0]: Not found: "nic": must be one of the names in '
            "pod.spec.resourceClaims: gpu",
        ),
        (
            DRA_TEMPLATE.replace(
                "deviceClassName: gpu.tessera.dev", "deviceClassName: gpu.tessera.dev\n            allocationMode: Some"
            ),
            'spec.spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some"',
        ),
    ],
    ids=["duplicate-pod-claim", "container-claim-names-no-pod-claim", "bad-template"],
)
def test_bad_dra_input_is_kubes_error(up: Up, namespace: str, manifest: str, error: str) -> None:
    out = up.kubectl("apply", "-f", "-", "-n", namespace, stdin=manifest, check=False)
    assert "is invalid" in out and error in out, out
