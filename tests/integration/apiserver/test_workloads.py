"""apps/v1, batch/v1 and policy/v1 on the embedded server, through the official client over HTTP:
defaults and validation as kube-apiserver applies them, the scale subresource, delete propagation
and the Eviction subresource honouring PodDisruptionBudgets. No controller runs here: these are
the server's own rules."""

import json
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.integration


def deployment(name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    template_labels = labels if labels is not None else {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]},
            },
            **spec,
        },
    }


def causes(e: ApiException) -> dict[str, str]:
    body = json.loads(e.body)
    return {c["field"]: c["message"] for c in body["details"]["causes"]}


def test_deployment_defaults_as_kube_apiserver(api_client: k8s.ApiClient, namespace: str) -> None:
    apps = k8s.AppsV1Api(api_client)
    made = apps.create_namespaced_deployment(namespace, deployment("web"))
    assert made.spec.replicas == 1 and made.spec.revision_history_limit == 10
    assert made.spec.progress_deadline_seconds == 600
    assert made.spec.strategy.type == "RollingUpdate"
    assert (made.spec.strategy.rolling_update.max_surge, made.spec.strategy.rolling_update.max_unavailable) == (
        "25%",
        "25%",
    )
    pod_spec = made.spec.template.spec
    assert (pod_spec.restart_policy, pod_spec.dns_policy, pod_spec.scheduler_name) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert made.metadata.generation == 1


def test_workload_validation_names_each_field(api_client: k8s.ApiClient, namespace: str) -> None:
    apps = k8s.AppsV1Api(api_client)
    bad = deployment("bad", labels={"app": "other"}, replicas=-1)
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    with pytest.raises(ApiException) as e:
        apps.create_namespaced_deployment(namespace, bad)
    assert e.value.status == 422
    found = causes(e.value)
    assert "must be greater than or equal to 0" in found["spec.replicas"]
    assert "`selector` does not match template `labels`" in found["spec.template.metadata.labels"]
    assert 'supported values: "Always"' in found["spec.template.spec.restartPolicy"]
    apps.create_namespaced_deployment(namespace, deployment("web"))
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_deployment("web", namespace, {"spec": {"selector": {"matchLabels": {"x": "y"}}}})
    assert e.value.status == 422 and "field is immutable" in causes(e.value)["spec.selector"]


def test_job_gets_a_selector_on_its_uid_and_an_immutable_template(api_client: k8s.ApiClient, namespace: str) -> None:
    batch = k8s.BatchV1Api(api_client)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
        },
    }
    made = batch.create_namespaced_job(namespace, job)
    uid = made.metadata.uid
    assert made.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert made.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "train"
    assert (made.spec.completions, made.spec.parallelism, made.spec.backoff_limit) == (1, 1, 6)
    with pytest.raises(ApiException) as e:
        batch.patch_namespaced_job("train", namespace, {"spec": {"template": {"spec": {"activeDeadlineSeconds": 5}}}})
    assert e.value.status == 422 and "field is immutable" in causes(e.value)["spec.template"]
    job["metadata"]["name"] = "always"
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_job(namespace, job)
    assert '"OnFailure", "Never"' in causes(e.value)["spec.template.spec.restartPolicy"]


def cronjob(name: str, schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
    pod = {"restartPolicy": "OnFailure", "containers": [{"name": "main", "image": "busybox"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": pod}}}, **spec},
    }


def test_cronjob_defaults_as_kube_apiserver(api_client: k8s.ApiClient, namespace: str) -> None:
    batch = k8s.BatchV1Api(api_client)
    made = batch.create_namespaced_cron_job(namespace, cronjob("nightly", "@daily", timeZone="Europe/Berlin"))
    spec = made.spec
    assert (spec.concurrency_policy, spec.suspend, spec.successful_jobs_history_limit) == ("Allow", False, 3)
    assert spec.failed_jobs_history_limit == 1 and spec.time_zone == "Europe/Berlin"
    pod = spec.job_template.spec.template.spec
    assert (pod.dns_policy, pod.scheduler_name) == ("ClusterFirst", "default-scheduler")
    assert spec.job_template.spec.selector is None, "each Job gets its own selector, not the template"
    assert made.status.active is None and made.status.last_schedule_time is None


def test_cronjob_validation_names_each_field_as_kube_does(api_client: k8s.ApiClient, namespace: str) -> None:
    batch = k8s.BatchV1Api(api_client)
    bad = cronjob("x" * 53, "61 * * * *", timeZone="Mars/Olympus", concurrencyPolicy="Sometimes")
    bad["spec"].update({"startingDeadlineSeconds": -1, "successfulJobsHistoryLimit": -2})
    bad["spec"]["jobTemplate"]["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_cron_job(namespace, bad)
    assert e.value.status == 422
    assert causes(e.value) == {
        "metadata.name": f'Invalid value: "{"x" * 53}": must be no more than 52 characters',
        "spec.schedule": 'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61',
        "spec.startingDeadlineSeconds": "Invalid value: -1: must be greater than or equal to 0",
        "spec.timeZone": 'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
        "spec.concurrencyPolicy": 'Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"',
        "spec.successfulJobsHistoryLimit": "Invalid value: -2: must be greater than or equal to 0",
        "spec.jobTemplate.spec.template.spec.restartPolicy": (
            'Unsupported value: "Always": supported values: "OnFailure", "Never"'
        ),
        "spec.jobTemplate.spec.selector": 'Invalid value: {"matchLabels":{"a":"b"}}: `selector` will be auto-generated',
    }
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_cron_job(namespace, cronjob("tz", "CRON_TZ=UTC 0 * * * *"))
    assert causes(e.value) == {
        "spec.schedule": (
            'Invalid value: "CRON_TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead'
        )
    }
    batch.create_namespaced_cron_job(namespace, cronjob("ok"))
    with pytest.raises(ApiException) as e:  # an update is checked too (the name's length only on create)
        batch.patch_namespaced_cron_job("ok", namespace, {"spec": {"schedule": "@fortnightly"}})
    assert causes(e.value) == {"spec.schedule": 'Invalid value: "@fortnightly": unrecognized descriptor: @fortnightly'}


def test_scale_subresource_reads_and_writes_replicas(api_client: k8s.ApiClient, namespace: str) -> None:
    apps = k8s.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=2))
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    assert scale.spec.replicas == 2 and scale.status.selector == "app=web"
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 5}})
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 5
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    scale.spec.replicas = 0
    apps.replace_namespaced_deployment_scale("web", namespace, scale)
    got = apps.read_namespaced_deployment("web", namespace)
    assert got.spec.replicas == 0 and got.metadata.generation == 3
    scale.spec.replicas = 4  # the Scale's resourceVersion is stale now
    with pytest.raises(ApiException) as e:
        apps.replace_namespaced_deployment_scale("web", namespace, scale)
    assert e.value.status == 409
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": -2}})
    assert e.value.status == 422
    with pytest.raises(ApiException) as e:  # decoded as a Scale, as kube decodes one
        apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": "3"}})
    assert e.value.status == 400
    assert json.loads(e.value.body)["message"] == (
        'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal string into '
        "Go struct field ScaleSpec.spec.replicas of type int32"
    )


def test_propagation_policy_leaves_the_finalizer_for_the_garbage_collector(
    api_client: k8s.ApiClient, namespace: str
) -> None:
    apps, batch = k8s.AppsV1Api(api_client), k8s.BatchV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("fg"))
    apps.delete_namespaced_deployment("fg", namespace, propagation_policy="Foreground")
    marked = apps.read_namespaced_deployment("fg", namespace)
    assert marked.metadata.deletion_timestamp is not None and marked.metadata.finalizers == ["foregroundDeletion"]
    apps.create_namespaced_deployment(namespace, deployment("bg"))
    apps.delete_namespaced_deployment("bg", namespace, propagation_policy="Background")
    with pytest.raises(ApiException) as e:
        apps.read_namespaced_deployment("bg", namespace)
    assert e.value.status == 404
    job = {
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}}},
    }
    batch.create_namespaced_job(namespace, job)
    batch.delete_namespaced_job("j", namespace)  # a Job orphans its pods unless asked otherwise
    assert batch.read_namespaced_job("j", namespace).metadata.finalizers == ["orphan"]
    with pytest.raises(ApiException) as e:
        apps.delete_namespaced_deployment("fg", namespace, propagation_policy="Sideways")
    assert e.value.status == 422 and "supported values" in causes(e.value)["propagationPolicy"]


def _ready_pod(core: k8s.CoreV1Api, namespace: str, name: str) -> None:
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": {"app": "db"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "m", "image": "x"}]},
        },
    )
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status(name, namespace, {"status": status})


def test_eviction_refused_with_429_when_the_budget_would_break(api_client: k8s.ApiClient, namespace: str) -> None:
    core, policy = k8s.CoreV1Api(api_client), k8s.PolicyV1Api(api_client)
    for name in ("db-0", "db-1"):
        _ready_pod(core, namespace, name)
    pdb = {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    policy.create_namespaced_pod_disruption_budget(namespace, pdb)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0"}}
    core.create_namespaced_pod_eviction("db-0", namespace, eviction)  # 2 healthy, 1 needed: allowed
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_eviction("db-1", namespace, {**eviction, "metadata": {"name": "db-1"}})
    assert e.value.status == 429
    body = json.loads(e.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert core.read_namespaced_pod("db-1", namespace).metadata.deletion_timestamp is None
    with pytest.raises(ApiException) as e:
        policy.create_namespaced_pod_disruption_budget(
            namespace, {"metadata": {"name": "both"}, "spec": {"minAvailable": 1, "maxUnavailable": "10%"}}
        )
    assert e.value.status == 422
