"""The trace replay protocol and `tessera simulate` on a tiny trace; the benchmark on a tiny cluster."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from apis.errors import ValidationError
from apis.extension import names
from cli.main import main
from cli.progress import ProgressBar
from scheduler.core import with_percentage_of_nodes_to_score
from scheduler.framework.config import SchedulerConfig
from scheduler.simulation import replay, trace
from scheduler.simulation.bench import run_bench, synthetic_pods

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,8,V100M32
n1,64000,262144,4,T4
n2,32000,131072,2,P100
n3,96000,393216,8,V100M32
"""


def pods_csv(count: int) -> str:
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    shapes = [
        (4000, 8192, 1, 500, ""),
        (8000, 16384, 1, 1000, ""),
        (2000, 4096, 0, 0, ""),
        (16000, 32768, 2, 1000, "T4|V100M32"),
    ]
    for i in range(count):
        cpu, mem, gpus, milli, spec = shapes[i % len(shapes)]
        rows.append(f"p{i},{cpu},{mem},{gpus},{milli},{spec}")
    return "\n".join(rows) + "\n"


def test_trace_rows_become_protocol_pods() -> None:
    share, whole, cpu, multi = trace.parse_pods(pods_csv(4).splitlines())
    assert share.to_pod().containers[0].requests == {
        names.CPU: 4000,
        names.MEMORY: 8192 << 20,
        names.GPU_CORE: 50,
        names.GPU_MEMORY_RATIO: 50,
    }
    assert whole.to_pod().containers[0].requests[names.NVIDIA_GPU] == 1
    assert names.NVIDIA_GPU not in cpu.to_pod().containers[0].requests
    affinity = multi.to_pod().node_affinity
    assert affinity is not None and affinity.required is not None
    assert affinity.required[0].match_expressions[0].values == ("T4", "V100M32")
    assert multi.gpu_milli_total == 2000


def test_bad_rows_name_the_line() -> None:
    with pytest.raises(ValidationError, match=r"pods:3.*num_gpu='x'"):
        trace.parse_pods(["name,cpu_milli,memory_mib,num_gpu,gpu_milli", "a,1,1,0,0", "b,1,1,x,0"])
    with pytest.raises(ValidationError, match="missing columns model"):
        trace.parse_nodes(["sn,cpu_milli,memory_mib,gpu"])


def test_workload_tops_up_to_130_percent_deterministically() -> None:
    pods = trace.parse_pods(pods_csv(20).splitlines())
    capacity = 22_000
    order = replay.workload(pods, capacity, seed=3)
    assert sorted(p.name for p in order[:20]) == sorted(p.name for p in pods)
    demand = sum(p.gpu_milli_total for p in order)
    assert demand >= 1.3 * capacity
    assert demand - order[-1].gpu_milli_total < 1.3 * capacity
    assert [p.name for p in replay.workload(pods, capacity, seed=3)] == [p.name for p in order]
    assert [p.name for p in replay.workload(pods, capacity, seed=4)] != [p.name for p in order]


def test_replay_measures_by_the_protocol() -> None:
    nodes = trace.parse_nodes(NODES.splitlines())
    pods = trace.parse_pods(pods_csv(40).splitlines())
    config = with_percentage_of_nodes_to_score(SchedulerConfig(), 100)
    result = replay.replay(nodes, pods, seed=1, config=config)
    assert result.pods_tried >= 40 and 0 < result.pods_scheduled < result.pods_tried
    assert min(result.alloc) <= 50 and max(result.alloc) >= 130
    assert all(0 <= v <= min(x, 100) + 1 for x, v in result.alloc.items())
    again = replay.replay(nodes, pods, seed=1, config=config)
    assert again == result
    summary = replay.summarize([result, replay.replay(nodes, pods, seed=2, config=config)])
    assert summary.unallocated_at_100[1] >= 0 and set(summary.curve) <= set(replay.CURVE_RANGE)


def test_replay_with_claims_packs_the_same_pods_through_dra() -> None:
    nodes = trace.parse_nodes(NODES.splitlines())
    pods = trace.parse_pods(pods_csv(40).splitlines())
    config = with_percentage_of_nodes_to_score(SchedulerConfig(), 100)
    koordinator = replay.replay(nodes, pods, seed=1, config=config)
    dra = replay.replay(nodes, pods, seed=1, config=config, claims_fraction=1.0)
    # Every pod with GPUs of one device (a share or whole ones) asks through a claim; the
    # multi-GPU shares of the trace stay in Koordinator's protocol.
    gpu_pods = [p for p in replay.workload(pods, 22_000, seed=1) if p.num_gpu and p.gpu_milli_total]
    assert koordinator.claim_pods == 0 and 0 < dra.claim_pods == len(gpu_pods)
    assert dra.pods_tried == koordinator.pods_tried
    # The claims are allocated (slices and the class are there): about as many pods placed
    # (without them only the pods without GPUs would be), packed by the DRA path's own rules.
    assert dra.pods_scheduled >= koordinator.pods_scheduled * 3 // 4
    unallocated = dra.unallocated(100)
    assert unallocated is not None and unallocated < 25
    assert replay.replay(nodes, pods, seed=1, config=config, claims_fraction=1.0) == dra


def test_simulate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_tiny.csv").write_text(pods_csv(60))
    args = ["simulate", "--data", str(tmp_path), "--trace", "tiny", "--seeds", "1-2", "--jobs", "1", "-o", "json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["seeds"] == [1, 2] and doc["gpus"] == 22
    assert set(doc["unallocated_gpu_pct_at_100"]) == {"mean", "sd"}
    assert 0 <= doc["unallocated_gpu_pct_at_100"]["mean"] <= 100
    assert "100" in doc["curve"] and doc["wall_seconds"] >= 0
    assert doc["scoring"] == "BalancedFGD" and "policies" not in doc  # the scheduler's default
    assert main(["simulate", "--data", str(tmp_path / "missing")]) == 1
    assert "No such file" in capsys.readouterr().err


def test_simulate_compares_policies_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(pods_csv(60))
    args = ["simulate", "--data", str(tmp_path), "--seeds", "1-2", "--jobs", "2", "--scoring", "MostAllocated,FGD"]
    assert main([*args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scoring"] == ["MostAllocated", "FGD"] and list(doc["policies"]) == ["MostAllocated", "FGD"]
    for policy in doc["policies"].values():
        assert set(policy["unallocated_gpu_pct_at_100"]) == {"mean", "sd"}
        assert [s["seed"] for s in policy["per_seed"]] == [1, 2]
    assert doc["published"]["FGD"] == 4.77  # the trace is named default: the paper's row
    assert main(args) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["policy", "x=100"]
    assert [line.split()[0] for line in lines[2:4]] == ["MostAllocated", "FGD"]
    assert "published (paper, x=100): Random 13.70" in out
    assert err == ""  # no progress bar when stderr is not a terminal
    assert main([*args[:-1], "FGD,Best"]) == 1
    assert "--scoring: unknown policy 'Best'" in capsys.readouterr().err
    # --claims-fraction: each policy again with claims, as its own row.
    claims = [*args[:-1], "MostAllocated", "--claims-fraction", "0.5"]
    assert main([*claims, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["policies"]) == ["MostAllocated", "MostAllocated+claims"] and doc["claims_fraction"] == 0.5
    assert all(s["claim_pods"] == 0 for s in doc["policies"]["MostAllocated"]["per_seed"])
    assert all(s["claim_pods"] > 0 for s in doc["policies"]["MostAllocated+claims"]["per_seed"])
    assert main([*claims[:-1], "1.5"]) == 1
    assert "--claims-fraction must be within 0..1" in capsys.readouterr().err


def test_simulate_a_mix_of_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(pods_csv(60))
    base = ["simulate", "--data", str(tmp_path), "--constrained", "50", "--constraint-models", "capacity"]
    out = tmp_path / "mix.csv"
    assert main([*base, "--mix-seed", "3", "--write-pods", str(out)]) == 0
    mixed = trace.parse_pods(out.read_text().splitlines())
    gpu = [p for p in mixed if p.num_gpu]
    assert sum(bool(p.gpu_spec) for p in gpu) == round(len(gpu) / 2)
    assert f"wrote 60 pods to {out}" in capsys.readouterr().out
    args = [*base, "--mix-seed", "3", "--seeds", "1", "--jobs", "1", "--scoring", "FGD,BalancedFGD", "-o", "json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mix"]["constrained"] == pytest.approx(50, abs=2)
    assert "published" not in doc  # the paper's row belongs to the trace's own mixes
    # Replaying the written mix gives what the knobs gave.
    again = ["simulate", "--data", str(tmp_path), "--pods", str(out), "--seeds", "1", "--jobs", "1"]
    assert main([*again, "--scoring", "FGD,BalancedFGD", "-o", "json"]) == 0
    replayed = json.loads(capsys.readouterr().out)["policies"]
    assert {k: v["curve"] for k, v in replayed.items()} == {k: v["curve"] for k, v in doc["policies"].items()}
    assert main([*base, "--constrained", "120"]) == 1
    assert "constrained=120" in capsys.readouterr().err


def test_simulate_a_fresh_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(pods_csv(60))
    args = ["simulate", "--data", str(tmp_path), "--seeds", "1", "--jobs", "1", "-o", "json"]
    results = {}
    for flags in (["--workload", "trace"], ["--workload", "learned"], ["--workload", "prior"], ["--pending", "30"]):
        assert main([*args, *flags]) == 0
        doc = json.loads(capsys.readouterr().out)
        results[" ".join(flags)] = doc["unallocated_gpu_pct_at_100"]["mean"]
        assert 0 <= results[" ".join(flags)] <= 100
    assert main([*args, "--pending", "-1"]) == 1
    assert "--pending" in capsys.readouterr().err


def test_simulate_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_tiny.csv").write_text(pods_csv(40))
    out = tmp_path / "curves.png"
    args = ["simulate", "--data", str(tmp_path), "--trace", "tiny", "--seeds", "1", "--jobs", "1"]
    assert main([*args, "--scoring", "LeastAllocated,BalancedFGD", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([*args, "--plot", str(tmp_path / "no-such-dir" / "x.png")]) == 1
    assert "--plot" in capsys.readouterr().err


def test_progress_bar_draws_on_a_terminal_only() -> None:
    stream = io.StringIO()
    bar = ProgressBar(4, stream)
    bar.update(1, "seed 1")
    bar.close()
    assert stream.getvalue() == ""  # StringIO is no terminal
    bar = ProgressBar(4, stream, force=True)
    bar.update(2, "seed 2")
    bar.close()
    assert stream.getvalue().startswith("\r[###############...............] 2/4 seed 2")
    assert stream.getvalue().endswith("\n")


def test_bench_runs_the_whole_cycle(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_bench(nodes=4, gpus_per_node=8, pods=30, seed=2)
    assert result.pods == 30 and 0 < result.scheduled <= 30 and result.p50_ms <= result.p99_ms
    multi = [p for p in synthetic_pods(400, seed=2) if p.containers[0].requests.get(names.NVIDIA_GPU, 0) > 1]
    assert multi and all(names.ANNOTATION_DEVICE_JOINT_ALLOCATE in p.annotations for p in multi)
    assert main(["bench", "scheduler", "--nodes", "3", "--pods", "20", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nodes"] == 3 and doc["pods"] == 20 and doc["pods_per_second"] > 0
