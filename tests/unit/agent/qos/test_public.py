"""agent.qos exports what the agent process wires (completeness: tests/unit/agent/test_public_api.py)."""

import agent.qos


def test_the_wiring_entry_points_are_exported() -> None:
    assert {
        "BESuppressor",
        "CgroupUsageSampler",
        "Hierarchy",
        "KubeCgroups",
        "NetworkQoS",
        "PodLookup",
        "PodSource",
        "QoSHookPlugin",
        "Reconciler",
        "load_config",
    } <= set(agent.qos.__all__)
