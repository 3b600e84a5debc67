"""`tessera top`'s table: one line per node, GPUs as cells filled by their pods' shares."""

from __future__ import annotations

from apis.extension import names
from cli import top
from tests.support.gpuobjects import make_device, make_pod


def test_cells_fill_by_share_mark_fragments_and_name_failures() -> None:
    pods = [
        make_pod("a", node="n1", gpus={0: 100, 1: 50}),
        # pending, 2 whole GPUs: no node has two free, so the idle half of GPU 1 and GPU 2 are fragmented
        make_pod("big", requests={names.NVIDIA_GPU: 2}),
    ]
    text = top.render([make_device("n1", gpus=4, unhealthy={3: "Xid79"})], pods, show_pods=True)
    lines = text.splitlines()
    assert lines[0].split() == ["NODE", "GPUS", "ALLOC", "IDLE", "FRAG"]
    assert lines[1] == "n1    [████][██░░][░░░░][XID7]  1.50  1.50  1.50"
    assert "GPU 0: default/a gpu-core=100" in text
    assert lines[-1] == "4 GPUs (1 unhealthy): 1.50 allocated, 1.50 idle, 1.50 fragmented"


def test_partial_cells_use_eighths() -> None:
    pods = [make_pod("a", node="n1", gpus={0: 30})]
    built = top.render([make_device("n1", gpus=1, rdma=False)], pods)
    assert "[█▎  ]" in built
