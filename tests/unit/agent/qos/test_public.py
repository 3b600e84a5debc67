"""agent.qos's public surface: what the agent process wires, sorted and complete."""

import agent.qos


def test_all_is_sorted_and_complete() -> None:
    assert list(agent.qos.__all__) == sorted(agent.qos.__all__)
    for name in agent.qos.__all__:
        assert hasattr(agent.qos, name), name


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
