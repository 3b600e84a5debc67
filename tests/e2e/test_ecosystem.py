"""The tools and workloads operators and ML teams bring, against one `tessera up`: a real Prometheus
(Debian's) scraping every component with deploy/monitoring's rules loaded, the Helm chart installed
with real Helm beside tessera up's own objects, Indexed Jobs with a gang (all ranks or none) —
Koordinator's annotations or scheduler-plugins' PodGroup, its status moving as that project's — a
DaemonSet on every node with a rolling update, pod failure policy and TTL after finished — driven
with kubectl as a user drives them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import helm_python as helm
import psutil
import pytest
import yaml

from apis.extension import names
from cli.localcluster.monitoring import NOT_SCRAPED, job_of
from tests.support import chart
from tests.support.cluster import unique
from tests.support.prometheus import PrometheusAPI, binary
from tests.support.up import Cluster, Up, module_up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 120.0
NAMESPACE = "tessera-system"
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
def up(workdir: Path) -> Iterator[Up]:
    """The module's `tessera up`, with `--prometheus` where Prometheus is installed (the tests that
    ask it skip, or under CI=true fail, where it is not); its Prometheus stops with it."""
    flags = ("--prometheus",) if shutil.which("prometheus") else ()
    with module_up(workdir, *flags) as running:
        yield running
        pid = running.state().components["prometheus"].pid if flags else None
    assert pid is None or not psutil.pid_exists(pid), "Prometheus outlived tessera up"


@pytest.fixture(scope="module")
def prometheus(up: Up) -> PrometheusAPI:
    """The Prometheus `tessera up --prometheus` runs: every component, deploy/monitoring's rules."""
    binary("prometheus")
    return PrometheusAPI(up.state().components["prometheus"].url)


def test_prometheus_scrapes_every_component_with_no_target_down(up: Up, prometheus: PrometheusAPI) -> None:
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


def test_the_rules_load_and_the_recording_rules_compute(prometheus: PrometheusAPI) -> None:
    groups = prometheus.api("rules")["groups"]
    alerts = {r["name"] for g in groups for r in g["rules"] if r["type"] == "alerting"}
    assert {"TesseraGPUUnhealthy", "TesseraAgentNotReporting", "TesseraWebhookFailingClosed"} <= alerts
    assert all(r["health"] == "ok" for g in groups for r in g["rules"] if r.get("lastEvaluation")), groups
    counts = wait_for(
        lambda: prometheus.query("tessera:gpus:count_by_node") or None, timeout_s=TIMEOUT_S, what="a recording rule"
    )
    assert all(float(c["value"][1]) == 8 for c in counts if c["metric"]["node"].startswith("sim-"))
    assert prometheus.query('ALERTS{alertname="TesseraAgentNotReporting"}') == []


def test_prometheus_follows_a_component_restarted_on_a_new_port(up: Up, prometheus: PrometheusAPI) -> None:
    # A component that restarts picks a new port; tessera up rewrites the targets file Prometheus
    # watches, so the new process is scraped without a restart of Prometheus.
    before = up.state().components["descheduler"]
    assert before.pid is not None
    os.kill(before.pid, signal.SIGKILL)
    up.wait_restarted("descheduler", before.pid)
    address = urlsplit(up.state().components["descheduler"].url).netloc

    def scraped_there() -> list[dict[str, Any]] | None:
        found = [t for t in prometheus.targets() if t["labels"]["job"] == "tessera-descheduler"]
        ok = [t["labels"]["instance"] for t in found if t["health"] == "up"] == [address]
        return found if ok and len(found) == 1 else None

    wait_for(scraped_there, timeout_s=TIMEOUT_S, what=f"Prometheus to scrape the restarted descheduler at {address}")


#: What `tessera up` applies as its own (cli/localcluster/ownnames.py), by the label it gives them.
OWN_KINDS = "clusterroles,clusterrolebindings,roles,rolebindings,services,endpoints,validatingwebhookconfigurations"


def tessera_ups_own(up: Up) -> dict[str, tuple[str, str]]:
    """`kind/namespace/name` -> (uid, resourceVersion) of every object tessera up applied as its own."""
    listing = up.kubectl("get", OWN_KINDS, "-A", "-l", "app.kubernetes.io/managed-by=tessera-up", "-o", "json")
    return {
        f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": (
            o["metadata"]["uid"],
            o["metadata"]["resourceVersion"],
        )
        for o in json.loads(listing)["items"]
    }


def test_helm_installs_upgrades_and_uninstalls_the_chart_beside_tessera_ups_own_objects(up: Up) -> None:
    # docs/user/deploy.md's `helm install tessera deploy/helm/tessera --namespace tessera-system`,
    # with Helm's default storage (Secrets), into the namespace tessera up runs in: every object of
    # the chart installs, and tessera up's own (deploy/'s RBAC and webhook, under its own names)
    # are neither changed nor, at uninstall, deleted.
    ours = tessera_ups_own(up)
    assert "ClusterRole//tessera-up:tessera-scheduler" in ours, ours
    assert "ValidatingWebhookConfiguration//tessera-up-tessera-controller" in ours
    rendered = {chart.identity(o) for o in chart.objects()}
    kinds = ",".join(sorted({kind for _, kind, _, _ in rendered}))

    def installed() -> set[tuple[str, str, str, str]]:
        """The chart's objects that the release owns now."""
        listing = json.loads(up.kubectl("get", kinds, "-A", "-o", "json"))["items"]
        return {
            chart.identity(o)
            for o in listing
            if (o["metadata"].get("annotations") or {}).get("meta.helm.sh/release-name") == chart.RELEASE
        } & rendered

    with helm.Config(namespace=NAMESPACE, kubeconfig_path=str(up.kubeconfig)) as cfg:
        release = cfg.install(str(chart.CHART), chart.RELEASE, {}, timeout=60)
        assert (release["revision"], release["status"]) == (1, "deployed")
        assert installed() == rendered
        assert tessera_ups_own(up) == ours, "installing the chart changed tessera up's own objects"
        upgraded = cfg.upgrade(str(chart.CHART), chart.RELEASE, {"scheduler": {"replicas": 1}}, timeout=60)
        assert (upgraded["revision"], upgraded["status"]) == (2, "deployed")
        assert [(r["name"], r["status"]) for r in cfg.list()] == [(chart.RELEASE, "deployed")]
        assert tessera_ups_own(up) == ours, "upgrading the release changed tessera up's own objects"
        cfg.uninstall(chart.RELEASE)
    assert installed() == set()
    assert tessera_ups_own(up) == ours, "uninstalling the release deleted or changed tessera up's own objects"
    # The components keep deploy/'s rights (the module's teardown also finds no 403 in any log).
    scheduler = up.data_dir / "kubeconfigs" / "tessera-scheduler.kubeconfig"
    assert (
        up.kubectl("--kubeconfig", str(scheduler), "auth", "can-i", "create", "pods", "--subresource=binding").strip()
        == "yes"
    )


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


def upstream_pod_group(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    """scheduler-plugins' PodGroup, as Kubeflow's training operator makes one for a job."""
    return {
        "apiVersion": names.UPSTREAM_POD_GROUPS.api_version,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, **spec},
    }


def labelled_ranks(name: str, *, ranks: int, gpus_each: int) -> dict[str, Any]:
    """`indexed_job` whose pods carry scheduler-plugins' PodGroup label instead of Koordinator's
    gang annotations (what the training operator's pods carry)."""
    job = indexed_job(name, ranks=ranks, gpus_each=gpus_each)
    template = job["spec"]["template"]
    template["metadata"] = {"labels": {names.LABEL_UPSTREAM_POD_GROUP: name}}
    return job


def gpu_nodes(cluster: Cluster) -> dict[str, int]:
    """Node name -> whole GPUs it publishes (the nodes with any)."""
    per_gpu = 100
    return {
        name: node.allocatable.get(names.GPU_CORE, 0) // per_gpu
        for name, node in cluster.nodes().items()
        if node.allocatable.get(names.GPU_CORE, 0)
    }


def fill_leaving(up: Up, cluster: Cluster, namespace: str, tmp_path: Path, free: int) -> list[str]:
    """Another team's pods, scheduled by Tessera onto each GPU node, leaving `free` GPUs there;
    returns their names once all run."""
    fillers = []
    for node, gpus in sorted(gpu_nodes(cluster).items()):
        name = f"filler-{node}"
        fillers.append(name)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulerName": names.SCHEDULER_NAME,
                "nodeSelector": {names.LABEL_HOSTNAME: node},
                "containers": [
                    {"name": "main", "image": "busy", "resources": {"limits": {names.NVIDIA_GPU: str(gpus - free)}}}
                ],
            },
        }
        apply(up, tmp_path, pod, namespace)
    wait_for(
        lambda: (
            all(p.phase == "Running" for p in cluster.pods(namespace) if p.name in fillers)
            and len([p for p in cluster.pods(namespace) if p.name in fillers]) == len(fillers)
        ),
        timeout_s=TIMEOUT_S,
        what="the filler pods running",
    )
    return fillers


def pod_group_status(up: Up, name: str, namespace: str) -> dict[str, Any]:
    raw = up.kubectl("get", f"podgroups.{names.UPSTREAM_SCHEDULING_GROUP}", name, "-n", namespace, "-o", "json")
    return dict(json.loads(raw).get("status") or {})


def test_a_scheduler_plugins_pod_group_of_four_two_gpu_ranks_with_room_for_three_is_all_or_nothing(
    up: Up, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The issue's case, with kubectl: a PodGroup of scheduling.x-k8s.io with minMember 4 and a
    4-rank Indexed Job of 2-GPU pods labelled with it, on a cluster with room for three: no rank
    is bound, and the PodGroup says Scheduling, occupied by the Job. With room for the fourth,
    all four run and the PodGroup says Running, as scheduler-plugins' controller would."""
    ns = ("-n", namespace)
    others = unique("others")
    cluster.create_namespace(others)
    try:
        fillers = fill_leaving(up, cluster, others, tmp_path, free=2)
        assert len(fillers) == 3  # 3 GPU nodes with 2 GPUs free each: room for three ranks
        apply(up, tmp_path, upstream_pod_group("ranks", 4, scheduleTimeoutSeconds=20), namespace)
        apply(up, tmp_path, labelled_ranks("ranks", ranks=4, gpus_each=2), namespace)

        def all_refused() -> list[Any] | None:
            pods = cluster.core.list_namespaced_pod(namespace, label_selector="job-name=ranks").items
            refused = [
                p
                for p in pods
                if any(c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or ())
            ]
            return pods if len(pods) == 4 == len(refused) else None

        pods = wait_for(all_refused, timeout_s=TIMEOUT_S, what="the scheduler to refuse the 4 ranks")
        assert [p.spec.node_name for p in pods] == [None] * 4, "a rank was bound though its gang cannot be whole"
        status = wait_for(
            lambda: (s := pod_group_status(up, "ranks", namespace)).get("phase") == "Scheduling" and s,
            timeout_s=TIMEOUT_S,
            what="the PodGroup Scheduling",
        )
        assert status["occupiedBy"] == f"{namespace}/ranks" and "scheduled" not in status
        message = next(c.message for c in pods[0].status.conditions if c.type == "PodScheduled")
        assert f"gang {namespace}/ranks" in message
        # Room for the fourth rank: the whole gang is bound, and runs.
        up.kubectl("delete", "pod", fillers[0], "-n", others, "--wait=true")
        wait_for(
            lambda: (s := pod_group_status(up, "ranks", namespace)).get("phase") == "Running" and s.get("running") == 4,
            timeout_s=TIMEOUT_S,
            what="the PodGroup Running with its 4 ranks",
        )
        placed = json.loads(up.kubectl("get", "pods", "-l", "job-name=ranks", "-o", "json", *ns))["items"]
        assert sorted(p["status"]["phase"] for p in placed) == ["Running"] * 4
        gang_ids = {p["metadata"]["annotations"][names.ANNOTATION_BIND_GANG_GROUP_ID] for p in placed}
        assert gang_ids == {f"{namespace}/ranks"}
    finally:
        up.kubectl("delete", "job", "ranks", "--cascade=foreground", "--ignore-not-found", *ns)
        cluster.delete_namespace(others)


def test_tessera_explain_says_why_a_scheduler_plugins_gang_is_not_started(
    up: Up, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """minResources that the cluster cannot hold, and a pod naming both kinds of gang: each pod
    is pending with the reason, an Event says the conflict, and `tessera explain` prints both."""
    apply(up, tmp_path, upstream_pod_group("huge", 1, minResources={names.NVIDIA_GPU: "1000"}), namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "huge-0", "labels": {names.LABEL_UPSTREAM_POD_GROUP: "huge"}},
        "spec": {
            "schedulerName": names.SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "trainer", "resources": {"limits": {names.NVIDIA_GPU: "1"}}}],
        },
    }
    apply(up, tmp_path, pod, namespace)
    both = {
        **pod,
        "metadata": {"name": "both-0", "labels": {names.LABEL_UPSTREAM_POD_GROUP: "x", names.LABEL_POD_GROUP: "x"}},
    }
    apply(up, tmp_path, both, namespace)

    def pending(name: str) -> str:
        pods = {p.name: p for p in cluster.pods(namespace)}
        return pods[name].pending_message if name in pods else ""

    wait_for(lambda: pending("huge-0") and pending("both-0"), timeout_s=TIMEOUT_S, what="both pods refused")
    gap = "its PodGroup's minResources do not fit in the cluster's free resources: koordinator.sh/gpu-core needs 100k"
    conflict = f"pod {namespace}/both-0 names two kinds of gang"
    assert gap in pending("huge-0") and conflict in pending("both-0")
    assert gap in up.tessera("explain", "huge-0", "-n", namespace)
    explained = up.tessera("explain", "both-0", "-n", namespace)
    assert f"Fix the pod: {conflict}" in explained and "(retried only when the pod changes)" in explained
    events = json.loads(up.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
    assert any(e["reason"] == "GangConflict" and conflict in e["message"] for e in events)


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


def test_a_job_from_a_cronjob_runs_and_the_cronjob_records_it(up: Up, namespace: str, tmp_path: Path) -> None:
    # `kubectl create job --from=cronjob/NAME` (how kube's docs run a CronJob now): the Job is the
    # CronJob's (its controller), so the CronJob controller sees it run and records its success.
    version = json.loads(up.kubectl("version", "--client", "-o", "json"))["clientVersion"]
    if int(version["minor"].rstrip("+")) < 21:
        pytest.skip("kubectl before 1.21 reads CronJobs as batch/v1beta1, which Kubernetes 1.25+ no longer serves")
    ns = ("-n", namespace)
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "report"},
        "spec": {
            "schedule": "0 3 1 1 *",  # once a year: it does not come during the test
            "timeZone": "Europe/Berlin",
            "jobTemplate": {
                "metadata": {"labels": {"team": "ml"}},
                "spec": {
                    "template": {
                        "metadata": {"annotations": {names.ANNOTATION_SIMULATED_RUN_SECONDS: "0.5"}},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
                    }
                },
            },
        },
    }
    apply(up, tmp_path, cronjob, namespace)
    listed = up.kubectl("get", "cronjobs", *ns).splitlines()
    assert listed[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert listed[1].split()[:8] == ["report", "0", "3", "1", "1", "*", "Europe/Berlin", "False"]
    up.kubectl("create", "job", "by-hand", "--from=cronjob/report", *ns)
    up.kubectl("wait", "--for=condition=complete", "job/by-hand", "--timeout=120s", *ns)
    job = json.loads(up.kubectl("get", "job", "by-hand", "-o", "json", *ns))
    assert job["metadata"]["annotations"][names.ANNOTATION_CRONJOB_INSTANTIATE] == "manual"
    assert job["metadata"]["labels"]["team"] == "ml"
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("CronJob", "report", True)

    def recorded() -> dict[str, Any] | None:
        status: dict[str, Any] = json.loads(up.kubectl("get", "cronjob", "report", "-o", "json", *ns))["status"]
        return status if status.get("lastSuccessfulTime") == job["status"]["completionTime"] else None

    status = wait_for(recorded, timeout_s=TIMEOUT_S, what="the CronJob to record the Job's success")
    assert "lastScheduleTime" not in status and not status.get("active"), "a Job by hand is no scheduled run"
    # Deleting the CronJob takes its Jobs with it (the garbage collector), as in a cluster.
    up.kubectl("delete", "cronjob", "report", *ns)
    wait_for(
        lambda: up.kubectl("get", "jobs,pods", "-o", "name", *ns).strip() == "",
        timeout_s=TIMEOUT_S,
        what="the CronJob's Job and its pod to be deleted with it",
    )
