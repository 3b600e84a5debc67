"""The learned target workload: it follows the mix, counts a pod once, is shared per profile."""

from __future__ import annotations

from scheduler import fragmentation
from scheduler.cache import ClusterCache
from scheduler.fragmentation import TaskShape
from scheduler.framework.interfaces import Handle
from tests.unit.scheduler.fragmentation.shapes import A, B


def test_learner_follows_the_mix_and_counts_a_pod_once() -> None:
    learner = fragmentation.WorkloadLearner(fragmentation.WorkloadArgs())
    share, whole = TaskShape(gpus=1, gpu_percent=50), TaskShape(gpus=1, gpu_percent=100)
    for i in range(300):
        learner.observe(f"p{i}", share if i % 3 else whole)
        learner.observe("p0", whole)  # retried: counted once
    weights = dict(learner.current.shapes)
    assert set(weights) == {share, whole}
    assert abs(weights[share] - 2 * fragmentation.WEIGHT_SCALE // 3) < fragmentation.WEIGHT_SCALE // 50
    assert learner.index().workload is learner.current


def test_fixed_workload_is_not_learned() -> None:
    shapes = ((A, 1),)
    learner = fragmentation.WorkloadLearner(fragmentation.WorkloadArgs(shapes=shapes))
    assert learner.observe("p", B).shapes == shapes


def test_learner_is_shared_per_profile_and_arguments() -> None:
    handle = Handle(ClusterCache(), "tessera")
    args = fragmentation.WorkloadArgs()
    first = fragmentation.shared_learner(handle, args)
    assert fragmentation.shared_learner(handle, fragmentation.WorkloadArgs()) is first
    assert fragmentation.shared_learner(Handle(ClusterCache(), "tessera"), args) is not first
    assert fragmentation.shared_learner(handle, fragmentation.WorkloadArgs(shapes=((A, 1),))) is not first


def test_a_mix_that_only_wobbles_keeps_its_version() -> None:
    # Two shapes alternating: after the first few publications the mix moves by less than 5%,
    # so the version (under which scores are memoised) stays; a new shape taking over moves it.
    learner = fragmentation.WorkloadLearner(
        fragmentation.WorkloadArgs(learn=fragmentation.LearnSettings(refresh_every=10))
    )
    share, whole = TaskShape(gpus=1, gpu_percent=50), TaskShape(gpus=1, gpu_percent=100)
    versions = []
    for i in range(400):
        versions.append(learner.observe(f"p{i}", share if i % 2 else whole).version)
    assert versions[-1] == versions[200] > 0
    other = TaskShape(gpus=2, gpu_percent=100)
    for i in range(400, 440):
        learner.observe(f"p{i}", other)
    assert learner.current.version > versions[-1]
    assert other in dict(learner.current.shapes)


def test_learning_from_a_prior_starts_with_it_and_moves_away_as_pods_disagree() -> None:
    share, whole = TaskShape(gpus=1, gpu_percent=50), TaskShape(gpus=1, gpu_percent=100)
    args = fragmentation.WorkloadArgs(
        shapes=((share, 1), (whole, 3)), learn=fragmentation.LearnSettings(prior_pods=100), prior=True
    )
    learner = fragmentation.WorkloadLearner(args)
    assert dict(learner.current.shapes) == {share: 250_000, whole: 750_000}  # before any pod
    start = learner.current.version
    learner.observe("p0", share)  # one pod among 100 of the prior: less than 5% moved
    assert learner.current.version == start
    for i in range(1, 300):
        learner.observe(f"p{i}", share)
    assert dict(learner.current.shapes)[share] > 700_000  # 300 shares outweigh 100 prior pods
    assert learner.seen("p5") and not learner.seen("other")


def test_the_cut_to_max_shapes_keeps_every_model_sets_share() -> None:
    # 70 % of the pods in two common shapes, 30 % asking for a P100 in 30 rare shapes: a cut to
    # the 2 heaviest keeps the common ones, and the P100 set keeps its heaviest shape, which
    # carries the P100 pods' whole 30 % (dropping the others would leave the P100s worth 1 %).
    learner = fragmentation.WorkloadLearner(
        fragmentation.WorkloadArgs(learn=fragmentation.LearnSettings(max_shapes=2, refresh_every=1))
    )
    common = [TaskShape(milli_cpu=1000, gpus=1, gpu_percent=100), TaskShape(milli_cpu=2000, gpus=1, gpu_percent=50)]
    rare = [TaskShape(milli_cpu=100 * (i + 1), gpus=1, gpu_percent=100, models=frozenset({"P100"})) for i in range(30)]
    pods = [common[i % 2] for i in range(70)] + rare
    for i, shape in enumerate(pods):
        learner.observe(f"p{i}", shape)
    weights = dict(learner.current.shapes)
    assert len(weights) == 3
    p100 = sum(w for s, w in weights.items() if s.models)
    assert abs(p100 - 0.3 * fragmentation.WEIGHT_SCALE) < fragmentation.WEIGHT_SCALE // 100
    assert abs(sum(weights.values()) - fragmentation.WEIGHT_SCALE) <= len(weights)
