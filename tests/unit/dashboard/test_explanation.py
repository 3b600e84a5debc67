"""The explanation chain: quota → gang → nodes → devices, from the scheduler's Explain answer."""

from __future__ import annotations

from dashboard import explanation
from dashboard.explanation import Step
from proto.scheduler.v1 import scheduler_pb2 as pb


def node(name: str, *reasons: tuple[str, str]) -> pb.NodeReasons:
    return pb.NodeReasons(node=name, reasons=[pb.PluginReason(plugin=p, reason=r) for p, r in reasons])


def test_a_prefilter_rejection_is_the_whole_chain() -> None:
    answer = pb.ExplainResponse(
        state="pending", rejected=pb.PluginReason(plugin="ElasticQuota", reason="quota team-a: exceeds max")
    )
    assert explanation.chain(answer) == (Step("quota", "ElasticQuota", "quota team-a: exceeds max (every node)"),)


def test_node_reasons_are_counted_and_ordered_by_stage_then_frequency() -> None:
    answer = pb.ExplainResponse(
        state="pending",
        nodes=[
            node("a", ("DeviceShare", "Insufficient gpu devices")),
            node("b", ("DeviceShare", "Insufficient gpu devices")),
            node("c", ("TaintToleration", "untolerated taint")),
            node("d", ("Coscheduling", "gang waits")),
        ],
        nearest=[pb.NearMiss(node="a", missing=["2 more GPUs"])],
    )
    assert explanation.chain(answer) == (
        Step("gang", "Coscheduling", "1 node: gang waits"),
        Step("nodes", "TaintToleration", "1 node: untolerated taint"),
        Step("devices", "DeviceShare", "2 nodes: Insufficient gpu devices"),
        Step("devices", "", "nearest node a lacks 2 more GPUs"),
    )


def test_many_reasons_are_cut_with_a_count() -> None:
    answer = pb.ExplainResponse(state="pending", nodes=[node(f"n{i}", ("NodeAffinity", f"r{i}")) for i in range(9)])
    steps = explanation.chain(answer)
    assert len(steps) == 7 and steps[-1].text == "… and 3 more reasons"


def test_a_pod_that_is_not_pending_has_no_chain() -> None:
    assert explanation.chain(pb.ExplainResponse(state="bound", node="a")) == ()


def test_the_message_stands_in_when_no_node_gave_a_reason() -> None:
    answer = pb.ExplainResponse(state="pending", message="no nodes available")
    assert explanation.chain(answer) == (Step("nodes", "", "no nodes available"),)
