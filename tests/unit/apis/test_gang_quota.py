import pytest

from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.extension.gang import (
    GangMode,
    MatchPolicy,
    gang_conflict,
    gang_from_pod,
    gang_name,
    parse_duration,
    spec_from_pod_group,
)
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


def test_only_an_unreadable_min_makes_the_gang_invalid() -> None:
    for annotations in (
        {names.ANNOTATION_GANG_NAME: "g"},
        {names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "two"},
    ):
        with pytest.raises(AnnotationError) as e:
            gang_from_pod(pod(annotations))
        assert e.value.key == names.ANNOTATION_GANG_MIN_AVAILABLE and e.value.obj == "ml/p"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({names.ANNOTATION_GANG_MODE: "Lax"}, "'Lax' is not Strict or NonStrict"),
        ({names.ANNOTATION_GANG_WAITING_TIME: "soon"}, "'soon' is not a duration"),
        ({names.ANNOTATION_GANG_GROUPS: '["no-namespace"]'}, "is not a JSON list"),
        ({names.ANNOTATION_GANG_TOTAL_NUMBER: "x"}, "'x' is not a number"),
    ],
    ids=["mode", "waiting-time", "groups", "total-number"],
)
def test_unusable_values_fall_back_with_a_problem(extra: dict[str, str], problem: str) -> None:
    """As Koordinator: a bad mode, waiting time, group list or total is ignored for its default."""
    gang = gang_from_pod(pod({names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "2", **extra}))
    assert gang is not None and gang.min_available == 2 and not gang.error
    assert (gang.mode, gang.waiting_seconds, gang.groups, gang.total_number) == (GangMode.STRICT, 600, ("ml/g",), 2)
    assert len(gang.problems) == 1 and problem in gang.problems[0]


@pytest.mark.parametrize("raw", ["0", "-1"])
def test_a_min_of_zero_or_less_is_kept_as_zero_with_a_problem(raw: str) -> None:
    gang = gang_from_pod(pod({names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: raw}))
    assert gang is not None and gang.min_available == 0 and "not positive" in gang.problems[0]


def test_lightweight_labels_name_the_gang_and_their_min_wins() -> None:
    """scheduler-plugins' lightweight labels, read as Koordinator reads them: the PodGroup label
    first, then the name label, then the name annotation; the min label over the annotation."""
    labelled = gang_from_pod(
        pod(
            {names.ANNOTATION_GANG_NAME: "by-annotation", names.ANNOTATION_GANG_MIN_AVAILABLE: "5"},
            labels={names.LABEL_LIGHTWEIGHT_GANG_NAME: "by-label", names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE: "3"},
        )
    )
    assert labelled is not None and (labelled.name, labelled.min_available) == ("ml/by-label", 3)
    assert not labelled.from_pod_group
    label_and_annotation = gang_from_pod(
        pod({names.ANNOTATION_GANG_MIN_AVAILABLE: "4"}, labels={names.LABEL_LIGHTWEIGHT_GANG_NAME: "lw"})
    )
    assert label_and_annotation is not None and label_and_annotation.min_available == 4
    pod_group_first = gang_from_pod(pod(labels={names.LABEL_POD_GROUP: "pg", names.LABEL_LIGHTWEIGHT_GANG_NAME: "lw"}))
    assert pod_group_first is not None and pod_group_first.name == "ml/pg" and pod_group_first.from_pod_group
    with pytest.raises(AnnotationError) as e:
        gang_from_pod(
            pod(labels={names.LABEL_LIGHTWEIGHT_GANG_NAME: "lw", names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE: "x"})
        )
    assert e.value.key == names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE


def test_the_upstream_label_names_a_scheduler_plugins_pod_group() -> None:
    """scheduler-plugins' `scheduling.x-k8s.io/pod-group` label: a PodGroup of that group holds
    the gang's size."""
    spec = gang_from_pod(pod(labels={names.LABEL_UPSTREAM_POD_GROUP: "job"}))
    assert spec is not None and (spec.name, spec.from_pod_group, spec.upstream) == ("ml/job", True, True)
    assert spec.min_available is None
    koordinator = gang_from_pod(pod(labels={names.LABEL_POD_GROUP: "job"}))
    assert koordinator is not None and not koordinator.upstream


@pytest.mark.parametrize(
    ("annotations", "labels", "named"),
    [
        ({}, {names.LABEL_POD_GROUP: "a"}, f"{names.LABEL_POD_GROUP}=a"),
        ({}, {names.LABEL_LIGHTWEIGHT_GANG_NAME: "a"}, f"{names.LABEL_LIGHTWEIGHT_GANG_NAME}=a"),
        (
            {names.ANNOTATION_GANG_NAME: "a", names.ANNOTATION_GANG_MIN_AVAILABLE: "1"},
            {},
            f"{names.ANNOTATION_GANG_NAME}=a",
        ),
    ],
    ids=["pod-group-label", "lightweight-label", "annotation"],
)
def test_a_pod_naming_both_kinds_of_gang_is_in_none_with_the_reason(
    annotations: dict[str, str], labels: dict[str, str], named: str
) -> None:
    both = pod(annotations, labels={**labels, names.LABEL_UPSTREAM_POD_GROUP: "b"})
    reason = gang_conflict(both)
    assert reason == (
        f"pod ml/p names two kinds of gang: {named} (Koordinator's) and "
        f"{names.LABEL_UPSTREAM_POD_GROUP}=b (scheduler-plugins' PodGroup); keep one of them"
    )
    assert gang_name(both) is None
    with pytest.raises(AnnotationError) as e:
        gang_from_pod(both)
    assert e.value.key == names.LABEL_UPSTREAM_POD_GROUP and str(e.value).endswith("keep one of them")
    # Either one alone is a gang, and no conflict.
    assert gang_conflict(pod(annotations, labels)) == "" and gang_name(pod(annotations, labels)) == "ml/a"
    alone = pod(labels={names.LABEL_UPSTREAM_POD_GROUP: "b"})
    assert gang_conflict(alone) == "" and gang_name(alone) == "ml/b"


def upstream_group(spec: dict[str, object]) -> PodGroup:
    return PodGroup.from_dict(
        {
            "apiVersion": f"{names.UPSTREAM_SCHEDULING_GROUP}/v1alpha1",
            "metadata": {"name": "job", "namespace": "ml", "annotations": {names.ANNOTATION_GANG_MODE: "NonStrict"}},
            "spec": spec,
        }
    )


def test_a_scheduler_plugins_pod_group_reads_with_that_projects_semantics() -> None:
    """Strict, waiting-and-running (assigned = waiting + bound, as its Permit counts), its own
    default wait, minResources kept; Koordinator's gang annotations on it mean nothing."""
    group = upstream_group({"minMember": 4, "minResources": {names.NVIDIA_GPU: "8", "cpu": "4"}})
    assert group.upstream and group.resource == names.UPSTREAM_POD_GROUPS
    spec = spec_from_pod_group(group, default_wait=600, upstream_wait=60)
    assert (spec.name, spec.min_available, spec.total_number) == ("ml/job", 4, 4)
    assert (spec.mode, spec.match_policy, spec.waiting_seconds) == (
        GangMode.STRICT,
        MatchPolicy.WAITING_AND_RUNNING,
        60,
    )
    assert spec.upstream and spec.min_resources == {names.NVIDIA_GPU: 8, "cpu": 4000} and spec.problems == ()
    # scheduleTimeoutSeconds wins; 0 is the plugin's default, as there; below 0 falls back with a problem.
    assert spec_from_pod_group(upstream_group({"minMember": 2, "scheduleTimeoutSeconds": 30})).waiting_seconds == 30
    zero = spec_from_pod_group(upstream_group({"minMember": 2, "scheduleTimeoutSeconds": 0}), upstream_wait=45)
    assert (zero.waiting_seconds, zero.problems) == (45, ())
    negative = spec_from_pod_group(upstream_group({"minMember": 2, "scheduleTimeoutSeconds": -5}), upstream_wait=45)
    assert negative.waiting_seconds == 45 and "not positive" in negative.problems[0]


def test_a_scheduler_plugins_pod_group_round_trips_with_its_own_status() -> None:
    raw = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 10},
        "status": {"phase": "Scheduling", "running": 1, "occupiedBy": "ml/job"},
    }
    group = PodGroup.from_dict(raw)
    assert group.upstream and group.occupied_by == "ml/job" and group.phase is PodGroupPhase.SCHEDULING
    out = group.to_dict()
    assert (out["apiVersion"], "scheduled" in out["status"]) == ("scheduling.x-k8s.io/v1alpha1", False)
    assert PodGroup.from_dict(out) == group
    # An informer names the group itself; without apiVersion the object is Koordinator's.
    assert PodGroup.upstream_from_dict({"metadata": {"name": "x"}}).upstream
    assert not PodGroup.from_dict({"metadata": {"name": "x"}}).upstream


def test_a_pod_group_with_non_positive_values_falls_back() -> None:
    """Koordinator's PodGroup schema admits minMember and scheduleTimeoutSeconds ≤ 0: the gang
    takes min 0 and the default wait, each with a problem (a warning Event)."""
    group = PodGroup.from_dict(
        {"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": -1, "scheduleTimeoutSeconds": 0}}
    )
    assert (group.min_member, group.schedule_timeout_seconds) == (-1, 0)
    spec = spec_from_pod_group(group)
    assert (spec.min_available, spec.waiting_seconds, spec.from_pod_group) == (0, 600, True)
    assert [p.split(" ")[0] for p in spec.problems] == ["spec.minMember", "spec.scheduleTimeoutSeconds"]
    timed = spec_from_pod_group(
        PodGroup.from_dict({"metadata": {"name": "t"}, "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30}})
    )
    assert (timed.min_available, timed.waiting_seconds, timed.problems) == (2, 30, ())


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


def test_pod_group_round_trip_and_what_koordinator_admits() -> None:
    pg = PodGroup.from_dict(
        {
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60, "minResources": {"cpu": "3"}},
            "status": {"phase": "Scheduling", "scheduled": 1},
        }
    )
    assert pg.phase is PodGroupPhase.SCHEDULING and pg.min_resources == {"cpu": 3000}
    assert PodGroup.from_dict(pg.to_dict()) == pg
    assert PodGroup.from_dict({"metadata": {"name": "pg"}, "spec": {}}).min_member == 0  # Go's zero value
    assert PodGroup.from_dict({"metadata": {"name": "pg"}, "status": {"phase": "Done"}}).phase is PodGroupPhase.UNKNOWN


def test_unreadable_conditions_of_a_quota_are_none_not_a_malformed_quota() -> None:
    """The schema leaves Tessera's status.conditions unconstrained (Koordinator's does not know
    the field): whatever is there, the quota still reads."""
    quota = ElasticQuota.from_dict(
        {"metadata": {"name": "q"}, "spec": {"max": {"cpu": "2"}}, "status": {"conditions": "garbage"}}
    )
    assert quota.conditions == () and quota.max == {"cpu": 2000}
