"""The tools and workloads operators and ML teams bring, against one `tessera up`: a real Prometheus
(Debian's) scraping every component with deploy/monitoring's rules loaded, Indexed Jobs with a gang
(all ranks or none), a DaemonSet on every node with a rolling update, pod failure policy and TTL
after finished — driven with kubectl as a user drives them.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.extension import names
from cli.localcluster.monitoring import NOT_SCRAPED, job_of, prometheus_config
from tests.e2e.conftest import unique
from tests.e2e.harness import Cluster, Up
from tests.support.prometheus import Prometheus
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 120.0
REPO = Path(__file__).resolve().parents[2]
#: Metrics the docs name that every `tessera up` has samples of from the start (labelled counters
#: appear only once counted, so they are not here).
ALWAYS_EXPORTED = (
    "tessera_gpu_healthy",
    "tessera_gpu_memory_total_bytes",
    "tessera_gpu_utilization_ratio",
    "tessera_scheduler_pending_pods",
    "tessera_scheduler_cache_nodes",
    "tessera_scheduler_leader",
    "tessera_controller_leader",
    "tessera_descheduler_leader",
    "tessera_kube_controllers_syncs_total",
    "apiserver_request_total",
)


@pytest.fixture
def namespace(up: Up, cluster: Cluster) -> str:
    name = unique("eco")
    cluster.create_namespace(name)
    return name


def apply(up: Up, directory: Path, manifest: dict[str, Any], namespace: str) -> str:
    path = directory / f"{manifest['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return up.kubectl("apply", "-f", str(path), "-n", namespace)


@pytest.fixture(scope="module")
def prometheus(up: Up, workdir: Path) -> Iterator[Prometheus]:
    """Debian's Prometheus scraping every component `tessera up` runs, with deploy/monitoring's rules."""
    directory = workdir / "prometheus"
    directory.mkdir()
    kubeconfig = yaml.safe_load(up.kubeconfig.read_text())
    ca = directory / "ca.crt"
    ca.write_bytes(base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]))
    token = directory / "token"
    token.write_text(kubeconfig["users"][0]["user"]["token"])
    config = prometheus_config(up.state(), ca_file=ca, token_file=token, interval_s=2)
    with Prometheus.started(directory, config) as prom:
        yield prom


def test_prometheus_scrapes_every_component_with_no_target_down(up: Up, prometheus: Prometheus) -> None:
    expected = {(job_of(name), name) for name in up.state().components if name not in NOT_SCRAPED}
    assert {"tessera-apiserver", "tessera-scheduler", "tessera-agent", "tessera-controller"} <= {j for j, _ in expected}

    def all_up() -> list[dict[str, Any]] | None:
        targets = prometheus.targets()
        healthy = [t for t in targets if t["health"] == "up"]
        return targets if len(targets) == len(expected) == len(healthy) else None

    targets = wait_for(all_up, timeout_s=TIMEOUT_S, what=f"{len(expected)} targets, all up")
    seen = {(t["labels"]["job"], t["labels"]["component"]) for t in targets}
    assert seen == expected
    down = prometheus.query("up == 0")
    assert down == [], down
    # No target exposes a series twice, and every name the docs promise is there.
    duplicates = prometheus.query("prometheus_target_scrapes_sample_duplicate_timestamp_total > 0")
    assert duplicates == [], duplicates
    for name in ALWAYS_EXPORTED:
        assert prometheus.query(f"count({name})"), f"no {name} scraped"
    agents = {r["metric"]["node"] for r in prometheus.query("tessera_gpu_healthy")}
    assert {n for n in up.state().nodes() if n.startswith("sim-")} <= agents


def test_the_rules_load_and_the_recording_rules_compute(prometheus: Prometheus) -> None:
    groups = prometheus.api("rules")["groups"]
    alerts = {r["name"] for g in groups for r in g["rules"] if r["type"] == "alerting"}
    assert {"TesseraGPUUnhealthy", "TesseraAgentNotReporting", "TesseraWebhookFailingClosed"} <= alerts
    assert all(r["health"] == "ok" for g in groups for r in g["rules"] if r.get("lastEvaluation")), groups
    counts = wait_for(
        lambda: prometheus.query("tessera:gpus:count_by_node") or None, timeout_s=TIMEOUT_S, what="a recording rule"
    )
    assert all(float(c["value"][1]) == 8 for c in counts if c["metric"]["node"].startswith("sim-"))
    assert prometheus.query('ALERTS{alertname="TesseraAgentNotReporting"}') == []


def test_a_daemonset_runs_on_every_node_and_rolls_its_update(up: Up, namespace: str, tmp_path: Path) -> None:
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-exporter"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-exporter"}},
            "template": {
                "metadata": {"labels": {"app": "node-exporter"}},
                "spec": {"containers": [{"name": "main", "image": "exporter:1"}]},
            },
        },
    }
    ns = ("-n", namespace)
    apply(up, tmp_path, ds, namespace)
    up.kubectl("rollout", "status", "daemonset/node-exporter", "--timeout=120s", *ns)
    nodes = set(up.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").split())

    def placed(image: str) -> dict[str, str] | None:
        pods = json.loads(up.kubectl("get", "pods", "-l", "app=node-exporter", "-o", "json", *ns))["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        on = {p["spec"].get("nodeName", ""): p["spec"]["containers"][0]["image"] for p in live}
        ok = len(live) == len(nodes) and set(on) == nodes and set(on.values()) == {image}
        return on if ok and all(p["status"].get("phase") == "Running" for p in live) else None

    wait_for(lambda: placed("exporter:1"), timeout_s=TIMEOUT_S, what="one node-exporter pod per node")
    up.kubectl("set", "image", "daemonset/node-exporter", "main=exporter:2", *ns)
    assert "successfully rolled out" in up.kubectl(
        "rollout", "status", "daemonset/node-exporter", "--timeout=120s", *ns
    )
    wait_for(lambda: placed("exporter:2"), timeout_s=TIMEOUT_S, what="the new template on every node")
    status = json.loads(up.kubectl("get", "daemonset", "node-exporter", "-o", "json", *ns))["status"]
    assert status["desiredNumberScheduled"] == status["updatedNumberScheduled"] == len(nodes)


def indexed_job(name: str, *, ranks: int, gpus_each: int) -> dict[str, Any]:
    """An Indexed Job of `ranks` ranks in one gang (Koordinator's gang annotations on the template)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": ranks,
            "parallelism": ranks,
            "template": {
                "metadata": {
                    "annotations": {
                        names.ANNOTATION_GANG_NAME: name,
                        names.ANNOTATION_GANG_MIN_AVAILABLE: str(ranks),
                        names.ANNOTATION_SIMULATED_RUN_SECONDS: "2",
                    }
                },
                "spec": {
                    "schedulerName": names.SCHEDULER_NAME,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "trainer",
                            "resources": {"limits": {names.NVIDIA_GPU: str(gpus_each)}},
                        }
                    ],
                },
            },
        },
    }


def test_an_indexed_job_of_4_ranks_with_a_gang_runs_all_or_nothing(
    up: Up, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    ns = ("-n", namespace)
    # 4 ranks of 8 GPUs: the 3 simulated 8-GPU nodes hold 3 of them, so none may start.
    apply(up, tmp_path, indexed_job("too-big", ranks=4, gpus_each=8), namespace)

    def all_refused() -> list[Any] | None:
        pods = cluster.core.list_namespaced_pod(namespace, label_selector="job-name=too-big").items
        refused = [
            p for p in pods if any(c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or ())
        ]
        return pods if len(pods) == 4 == len(refused) else None

    pods = wait_for(all_refused, timeout_s=TIMEOUT_S, what="the scheduler to refuse the 4 ranks of 8 GPUs")
    assert [p.spec.node_name for p in pods] == [None] * 4, "a rank was bound though its gang cannot be whole"
    up.kubectl("delete", "job", "too-big", "--cascade=foreground", *ns)
    # 4 ranks of 4 GPUs fit: all of them run, each with its index, and the Job completes.
    apply(up, tmp_path, indexed_job("ranks", ranks=4, gpus_each=4), namespace)
    up.kubectl("wait", "--for=condition=complete", "job/ranks", "--timeout=120s", *ns)
    job = json.loads(up.kubectl("get", "job", "ranks", "-o", "json", *ns))
    assert (job["status"]["succeeded"], job["status"]["completedIndexes"]) == (4, "0-3")
    pods = json.loads(up.kubectl("get", "pods", "-l", "job-name=ranks", "-o", "json", *ns))["items"]
    indexes = sorted(p["metadata"]["annotations"][names.JOB_COMPLETION_INDEX] for p in pods)
    assert indexes == ["0", "1", "2", "3"]
    assert sorted(p["spec"]["hostname"] for p in pods) == [f"ranks-{i}" for i in range(4)]
    index_env = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{names.JOB_COMPLETION_INDEX}']"}},
    }
    assert all(index_env in p["spec"]["containers"][0]["env"] for p in pods)
    assert Counter(p["spec"]["nodeName"] for p in pods).most_common(1)[0][1] <= 2  # 4 GPUs each: 2 ranks a node


def test_pod_failure_policy_fails_the_job_and_ttl_deletes_a_finished_one(
    up: Up, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    ns = ("-n", namespace)
    failing = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "fatal"},
        "spec": {
            "backoffLimit": 6,
            "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]},
            "template": {
                "metadata": {
                    "annotations": {
                        names.ANNOTATION_SIMULATED_RUN_SECONDS: "0.5",
                        names.ANNOTATION_SIMULATED_EXIT_CODE: "42",
                    }
                },
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    apply(up, tmp_path, failing, namespace)
    up.kubectl("wait", "--for=condition=failed", "job/fatal", "--timeout=120s", *ns)
    status = json.loads(up.kubectl("get", "job", "fatal", "-o", "json", *ns))["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy", failed
    assert status["failed"] == 1, "FailJob stops at the first failure, not at backoffLimit"
    short = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "short-lived"},
        "spec": {
            "ttlSecondsAfterFinished": 1,
            "template": {
                "metadata": {"annotations": {names.ANNOTATION_SIMULATED_RUN_SECONDS: "0.5"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    apply(up, tmp_path, short, namespace)
    wait_for(
        lambda: (
            up.kubectl("get", "jobs,pods", "-l", "job-name=short-lived", "-o", "name", *ns).strip() == ""
            and "short-lived" not in up.kubectl("get", "jobs", "-o", "name", *ns)
        ),
        timeout_s=TIMEOUT_S,
        what="the finished Job and its pod to be deleted by its TTL",
    )
