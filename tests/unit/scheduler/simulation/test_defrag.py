"""The defragmentation measurement on a tiny trace: 60% shares spread by LeastAllocated leave no
node with 8 free GPUs; the pass moves some of them and places 8-GPU pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from scheduler.core import with_percentage_of_nodes_to_score, with_scoring
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.simulation import defrag, trace

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,256000,1048576,8,V100M32
n1,256000,1048576,8,V100M32
n2,256000,1048576,8,V100M32
n3,256000,1048576,8,V100M32
"""
#: Shares of 60% (one CPU each), one 4-GPU and one 8-GPU task for the shapes.
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(f"s{i},1000,1024,1,600,\n" for i in range(40))
SHAPES = "big4,8000,16384,4,1000,\nbig8,16000,32768,8,1000,\n"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES, encoding="utf-8")
    (tmp_path / "openb_pod_list_tiny.csv").write_text(PODS + SHAPES, encoding="utf-8")
    return tmp_path


def test_the_shape_is_the_traces_most_common_for_the_gpu_count() -> None:
    pods = trace.parse_pods((PODS + SHAPES + "big8b,16000,32768,8,1000,\nbig8c,1,1,8,1000,\n").splitlines())
    shape = defrag.shape_of(pods, 8)
    assert shape is not None and (shape.milli_cpu, shape.memory_mib, shape.num_gpu) == (16000, 32768, 8)
    assert defrag.shape_of(pods, 2) is None


def test_a_pass_moves_shares_to_make_room_for_whole_gpu_pods() -> None:
    nodes = trace.parse_nodes(NODES.splitlines())
    pods = trace.parse_pods((PODS + "big8,16000,32768,8,1000,\n").splitlines())
    # Spreading (LeastAllocated) scatters shares over GPUs: the fragmentation a pass repairs.
    config = with_scoring(
        with_percentage_of_nodes_to_score(SchedulerConfig(), 100), ScoringStrategyType.LEAST_ALLOCATED
    )
    result = defrag.run_defrag(nodes, pods, seed=1, config=config, shapes=(8,), load=40, budget=20)
    (one,) = result.passes
    assert one.placed_moved >= 1 and 1 <= one.migrations <= 20
    assert one.unallocated_after < result.unallocated_before
    assert len(one.plan_seconds) == one.placed_free + one.placed_moved + 1  # the last plan found none
    assert one.stop


def test_simulate_defrag_through_the_command_line(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--data", str(data), "--trace", "tiny", "--seeds", "1", "--jobs", "1", "--defrag"]
    spread = [*args, "--scoring", "LeastAllocated"]
    assert main([*spread, "--defrag-load", "40", "--defrag-budget", "12", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["load"] == 40 and doc["budget"] == 12
    (seed,) = doc["seeds"]
    assert [p["gpus"] for p in seed["passes"]] == [8, 4]
    assert all(p["migrations"] <= 12 for p in seed["passes"])
    assert main([*spread, "--defrag-load", "40"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "trace openb_pod_list_tiny.csv, LeastAllocated, fill to x = 40, then defragmentation"
    assert "seed 1, 8 GPUs: stopped: " in out
    assert main([*args, "--defrag-shapes", "8,x"]) == 1
    assert main([*args, "--scoring", "MostAllocated,LeastAllocated"]) == 1
    assert "--defrag measures one policy" in capsys.readouterr().err
