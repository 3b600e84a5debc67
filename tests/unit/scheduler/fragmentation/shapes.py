"""The worked example the fragmentation tests share: a node with GPUs free 100/50/0 (T = 150)
against the workload A = one GPU at 30% (weight 2), B = one GPU at 60% (weight 1), C = two
whole GPUs (weight 1), D = CPU only (weight 1):

    F(A) = 0 (no GPU has less than 30 free but the empty one), F(B) = 50 (GPU 1), F(C) = 150
    (two idle GPUs needed, one there), F(D) = 150 (a task without GPU uses none)
    F_n = 2·0 + 50 + 150 + 150 = 350

A 40% share on GPU 0 (free 60/50/0): F_n' = 0 + 50 + 110 + 110 = 270; on GPU 1 (100/10/0):
F_n' = 2·10 + 10 + 110 + 110 = 250. With P = 5 and d = 40 the loss of usable GPU is
F_n' − F_n + P·d: 120 on GPU 0, 100 on GPU 1, so FGD puts the share on GPU 1.
"""

from __future__ import annotations

from scheduler.fragmentation import NodeResources, TargetWorkload, TaskShape

A = TaskShape(gpus=1, gpu_percent=30)


B = TaskShape(gpus=1, gpu_percent=60)


C = TaskShape(gpus=2, gpu_percent=100)


D = TaskShape(milli_cpu=1000)


WORKLOAD = TargetWorkload(((A, 2), (B, 1), (C, 1), (D, 1)), 1)


NODE = NodeResources(milli_cpu=64_000, memory=1 << 40, gpu_model="A100", gpu_free=(100, 50, 0))
