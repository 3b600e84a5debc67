import pytest

from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.extension.gang import GangMode, gang_from_pod, parse_duration
from apis.extension.quota import (
    ROOT_QUOTA_NAME,
    decode_resource_annotation,
    encode_resource_annotation,
    is_preemptible,
    pod_quota_name,
    tree_info,
)
from apis.k8s.core import Pod


def pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ml", "annotations": annotations or {}, "labels": labels or {}},
            "spec": {"containers": []},
        }
    )


def test_gang_from_annotations() -> None:
    gang = gang_from_pod(
        pod(
            {
                names.ANNOTATION_GANG_NAME: "train",
                names.ANNOTATION_GANG_MIN_AVAILABLE: "4",
                names.ANNOTATION_GANG_TOTAL_NUMBER: "2",
                names.ANNOTATION_GANG_MODE: "NonStrict",
                names.ANNOTATION_GANG_WAITING_TIME: "1h30m",
                names.ANNOTATION_GANG_GROUPS: '["ml/eval"]',
            }
        )
    )
    assert gang is not None
    assert (gang.name, gang.min_available, gang.total_number) == ("ml/train", 4, 4)  # total raised to min
    assert gang.mode is GangMode.NON_STRICT and gang.waiting_seconds == 5400
    assert gang.groups == ("ml/eval", "ml/train")


def test_gang_defaults_and_pod_group_label() -> None:
    gang = gang_from_pod(pod({names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "1"}))
    assert (
        gang is not None and gang.mode is GangMode.STRICT and gang.waiting_seconds == 600 and gang.groups == ("ml/g",)
    )
    via_cr = gang_from_pod(pod(labels={names.LABEL_POD_GROUP: "pg"}))
    assert via_cr is not None and via_cr.from_pod_group and via_cr.min_available is None
    assert gang_from_pod(pod()) is None


@pytest.mark.parametrize(
    ("annotations", "key"),
    [
        ({names.ANNOTATION_GANG_NAME: "g"}, names.ANNOTATION_GANG_MIN_AVAILABLE),
        (
            {names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "0"},
            names.ANNOTATION_GANG_MIN_AVAILABLE,
        ),
        (
            {
                names.ANNOTATION_GANG_NAME: "g",
                names.ANNOTATION_GANG_MIN_AVAILABLE: "1",
                names.ANNOTATION_GANG_MODE: "Lax",
            },
            names.ANNOTATION_GANG_MODE,
        ),
        (
            {
                names.ANNOTATION_GANG_NAME: "g",
                names.ANNOTATION_GANG_MIN_AVAILABLE: "1",
                names.ANNOTATION_GANG_WAITING_TIME: "soon",
            },
            names.ANNOTATION_GANG_WAITING_TIME,
        ),
        (
            {
                names.ANNOTATION_GANG_NAME: "g",
                names.ANNOTATION_GANG_MIN_AVAILABLE: "1",
                names.ANNOTATION_GANG_GROUPS: '["no-namespace"]',
            },
            names.ANNOTATION_GANG_GROUPS,
        ),
    ],
)
def test_bad_gang_annotations(annotations: dict[str, str], key: str) -> None:
    with pytest.raises(AnnotationError) as e:
        gang_from_pod(pod(annotations))
    assert e.value.key == key and e.value.obj == "ml/p"


@pytest.mark.parametrize(("text", "seconds"), [("600s", 600), ("1.5m", 90), ("1h30m", 5400), ("250ms", 0.25)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "10", "1d", "m5", "1h 2m"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_quota_readers() -> None:
    assert pod_quota_name(pod(labels={names.LABEL_QUOTA_NAME: "team-a"})) == "team-a"
    assert pod_quota_name(pod()) is None
    assert is_preemptible(pod()) and not is_preemptible(pod(labels={names.LABEL_QUOTA_PREEMPTIBLE: "false"}))
    quota = ElasticQuota.from_dict(
        {
            "metadata": {
                "name": "team-a",
                "namespace": "ml",
                "labels": {names.LABEL_QUOTA_PARENT: "org", names.LABEL_QUOTA_ALLOW_LENT_RESOURCE: "false"},
                "annotations": {names.ANNOTATION_QUOTA_SHARED_WEIGHT: '{"cpu":"2","nvidia.com/gpu":"4"}'},
            },
            "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}},
        }
    )
    info = tree_info(quota)
    assert (info.parent, info.is_parent, info.allow_lent_resource) == ("org", False, False)
    assert info.shared_weight == {"cpu": 2000, "nvidia.com/gpu": 4}
    assert tree_info(ElasticQuota.from_dict({"metadata": {"name": "x"}})).parent == ROOT_QUOTA_NAME


def test_resource_annotation_codec() -> None:
    text = encode_resource_annotation({"memory": 2**30, "cpu": 1500})
    assert text == '{"cpu":"1500m","memory":"1Gi"}'
    assert decode_resource_annotation("k", text) == {"memory": 2**30, "cpu": 1500}
    with pytest.raises(AnnotationError):
        decode_resource_annotation("k", '{"cpu":"x"}')


def test_elastic_quota_round_trip_and_validation() -> None:
    doc = {
        "metadata": {"name": "q", "namespace": "ml"},
        "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}},
        "status": {"used": {"cpu": "500m"}},
    }
    quota = ElasticQuota.from_dict(doc)
    assert ElasticQuota.from_dict(quota.to_dict()) == quota
    with pytest.raises(ValidationError, match="exceeds max"):
        ElasticQuota.from_dict({"metadata": {"name": "q"}, "spec": {"min": {"cpu": "3"}, "max": {"cpu": "2"}}})


def test_pod_group_round_trip_and_validation() -> None:
    pg = PodGroup.from_dict(
        {
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60, "minResources": {"cpu": "3"}},
            "status": {"phase": "Scheduling", "scheduled": 1},
        }
    )
    assert pg.phase is PodGroupPhase.SCHEDULING and pg.min_resources == {"cpu": 3000}
    assert PodGroup.from_dict(pg.to_dict()) == pg
    with pytest.raises(ValidationError, match="minMember"):
        PodGroup.from_dict({"metadata": {"name": "pg"}, "spec": {"minMember": 0}})
    with pytest.raises(ValidationError, match="status.phase"):
        PodGroup.from_dict({"metadata": {"name": "pg"}, "status": {"phase": "Done"}})
