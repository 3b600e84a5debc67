"""The mix generator: each knob reaches its value, deterministically, and only feasible models
are asked for."""

from __future__ import annotations

import pytest

from apis.errors import ValidationError
from scheduler.simulation import mixes, trace
from scheduler.simulation.mixes import ConstraintModels, MixSpec

NODES = trace.parse_nodes(
    """sn,cpu_milli,memory_mib,gpu,model
g0,96000,393216,8,G2
g1,96000,393216,8,G2
p0,16000,122880,2,P100
t0,104000,524288,2,T4
""".splitlines()
)


def pods() -> list[trace.TracePod]:
    """40 pods: shares, whole GPUs, 2- and 8-GPU pods and CPU-only ones, a few asking for T4."""
    out = []
    for i in range(40):
        kind = i % 5
        if kind in (0, 1):
            out.append(trace.TracePod(f"s{i}", 4000, 8192, 1, 250 + 100 * (i % 4)))
        elif kind == 2:
            out.append(trace.TracePod(f"w{i}", 8000, 16384, 1, 1000, ("T4",) if i % 3 == 0 else ()))
        elif kind == 3:
            out.append(trace.TracePod(f"m{i}", 32000, 65536, 8 if i == 3 else 2, 1000))
        else:
            out.append(trace.TracePod(f"c{i}", 16000, 32768, 0, 0))
    return out


def test_no_knob_keeps_the_pods() -> None:
    base = pods()
    assert MixSpec().empty
    mixed = mixes.build_mix(base, NODES, MixSpec(seed=3))
    assert [(p.milli_cpu, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in mixed] == [
        (p.milli_cpu, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in base
    ]


@pytest.mark.parametrize("how", list(ConstraintModels))
def test_constrained_pods_ask_for_models_that_can_host_them(how: ConstraintModels) -> None:
    mixed = mixes.build_mix(pods(), NODES, MixSpec(constrained=50, constraint_models=how, seed=1))
    assert mixes.describe(mixed)["constrained"] == 50
    for pod in mixed:
        if pod.num_gpu == 8:  # only the G2 nodes have eight GPUs
            assert pod.gpu_spec in ((), ("G2",))
        if pod.gpu_spec:
            assert set(pod.gpu_spec) <= {"G2", "P100", "T4"}


def test_the_pool_draw_takes_the_model_lists_of_the_pool() -> None:
    pool = [trace.TracePod("x", 1000, 1024, 1, 1000, ("P100", "T4")), trace.TracePod("y", 1000, 1024, 1, 500, ("T4",))]
    mixed = mixes.build_mix(pods(), NODES, MixSpec(constrained=100, seed=2), model_pool=pool)
    whole = {p.gpu_spec for p in mixed if p.num_gpu == 1 and p.gpu_milli == 1000}
    shares = {p.gpu_spec for p in mixed if 0 < p.gpu_milli < 1000}
    assert whole == {("P100", "T4")} and shares == {("T4",)}
    # No pool entry for 8-GPU pods: one model by capacity, the only one that hosts them.
    assert {p.gpu_spec for p in mixed if p.num_gpu == 8} == {("G2",)}


@pytest.mark.parametrize(
    "spec",
    [MixSpec(shared=25), MixSpec(shared=10), MixSpec(multi_gpu=75), MixSpec(multi_gpu=40), MixSpec(cpu_only=50)],
)
def test_fractions_reach_their_target(spec: MixSpec) -> None:
    mixed = mixes.build_mix(pods(), NODES, spec)
    described = mixes.describe(mixed)
    for knob in ("shared", "multi_gpu", "cpu_only"):
        target = getattr(spec, knob)
        if target is not None:
            assert abs(described[knob] - target) < 12, (knob, described)


def test_share_sizes_are_redrawn_from_the_given_sizes() -> None:
    mixed = mixes.build_mix(pods(), NODES, MixSpec(share_sizes=(15, 85), seed=4))
    assert {p.gpu_milli for p in mixed if 0 < p.gpu_milli < 1000} == {150, 850}
    drawn = mixes.build_mix(pods(), NODES, MixSpec(random_share_sizes=3, seed=4))
    assert len({p.gpu_milli for p in drawn if 0 < p.gpu_milli < 1000}) <= 3


def test_the_same_seed_gives_the_same_mix_and_another_another() -> None:
    spec = MixSpec(constrained=30, shared=50, seed=7)
    assert mixes.build_mix(pods(), NODES, spec) == mixes.build_mix(pods(), NODES, spec)
    other = mixes.build_mix(pods(), NODES, MixSpec(constrained=30, shared=50, seed=8))
    assert other != mixes.build_mix(pods(), NODES, spec)


def test_a_mix_reads_back_from_csv() -> None:
    mixed = mixes.build_mix(pods(), NODES, MixSpec(constrained=40, seed=5))
    assert trace.parse_pods(mixes.to_csv(mixed).splitlines()) == mixed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (MixSpec(constrained=120), "constrained=120"),
        (MixSpec(share_sizes=(0,)), "share size 0"),
        (MixSpec(share_sizes=(20,), random_share_sizes=2), "not both"),
        (MixSpec(cpu_only=100), "cpu_only=100"),
    ],
)
def test_bad_knobs_are_refused(spec: MixSpec, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        mixes.build_mix(pods(), NODES, spec)
