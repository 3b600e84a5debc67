"""Server-side printing: kubectl's columns and ages."""

import pytest

from apiserver.catalog import Catalog, Column, ResourceType
from apiserver.tables import human_duration, table, wants_table


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (59, "59s"),
        (119, "119s"),
        (300, "5m"),
        (330, "5m30s"),
        (3600, "60m"),
        (4 * 3600 + 120, "4h2m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400 + 86400, "3y1d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_pod_table() -> None:
    pods = Catalog().lookup("", "v1", "pods")
    assert pods is not None
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"containers": [{}, {}], "nodeName": "n1"},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2}]},
    }
    doc = table(pods, [pod], rv="7", query={})
    assert [c["name"] for c in doc["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    cells = doc["rows"][0]["cells"]
    assert cells[:4] == ["p", "1/2", "Running", 2] and cells[6] == "n1"
    assert doc["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")


def test_custom_columns_follow_json_paths() -> None:
    rt = ResourceType(
        "g.io", "v1", "things", "thing", "Thing", False, columns=(Column("Minor", "integer", ".spec.devices[1].minor"),)
    )
    doc = table(
        rt,
        [{"metadata": {"name": "t"}, "spec": {"devices": [{"minor": 0}, {"minor": 3}]}}],
        rv="1",
        query={"includeObject": "None"},
    )
    assert doc["rows"] == [{"cells": ["t", 3]}]


def test_workload_tables_print_kubectls_columns() -> None:
    catalog = Catalog()
    deployments, jobs, pods = (
        catalog.lookup("apps", "v1", "deployments"),
        catalog.lookup("batch", "v1", "jobs"),
        catalog.lookup("", "v1", "pods"),
    )
    assert deployments is not None and jobs is not None and pods is not None
    deployment = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 3},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    doc = table(deployments, [deployment], rv="1", query={})
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    assert doc["rows"][0]["cells"][:4] == ["web", "2/3", 3, 2]
    job = {
        "metadata": {"name": "train"},
        "spec": {"completions": 2},
        "status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert table(jobs, [job], rv="1", query={})["rows"][0]["cells"][:3] == ["train", "Complete", "2/2"]
    done = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {"reason": "Completed"}}}]},
    }
    assert table(pods, [done], rv="1", query={})["rows"][0]["cells"][2] == "Completed"


def test_cronjob_table_has_kubes_columns() -> None:
    cronjobs = Catalog().lookup("batch", "v1", "cronjobs")
    assert cronjobs is not None
    template = {
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y"}]}}}
    }
    cj = {
        "metadata": {"name": "nightly", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"schedule": "@daily", "suspend": True, "jobTemplate": template},
        "status": {"active": [{"name": "nightly-1"}, {"name": "nightly-2"}]},
    }
    doc = table(cronjobs, [cj], rv="7", query={})
    columns = [(c["name"], c["priority"]) for c in doc["columnDefinitions"]]
    assert columns == [
        ("Name", 0),
        ("Schedule", 0),
        ("Timezone", 0),
        ("Suspend", 0),
        ("Active", 0),
        ("Last Schedule", 0),
        ("Age", 0),
        ("Containers", 1),
        ("Images", 1),
        ("Selector", 1),
    ]
    cells = doc["rows"][0]["cells"]
    assert cells[:6] == ["nightly", "@daily", "<none>", "True", 2, "<none>"]
    assert cells[7:] == ["a,b", "x:1,y", "<none>"]
