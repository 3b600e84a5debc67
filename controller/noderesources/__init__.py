"""Node device resources: keep each Node's allocatable, capacity and GPU labels in line with its
Device CR (the Koordinator slo-controller's GPU and RDMA device resource plugins, in one).

`desired` (pure) says what a Device gives its Node, `plan` (pure) what to change and whether it
can wait, `reconciler` reads caches and writes the difference. See docs/user/controller.md.
"""

from controller.noderesources.reconciler import NAME, NodeResourcesReconciler, NodeResourcesSettings, add_to_manager

__all__ = ["NAME", "NodeResourcesReconciler", "NodeResourcesSettings", "add_to_manager"]
