"""PodGroup status: phase and member counts of every PodGroup CR, as Koordinator keeps them."""

from controller.podgroups.reconciler import PodGroupReconciler, add_to_manager
from controller.podgroups.status import GroupStatus, next_status

__all__ = ["GroupStatus", "PodGroupReconciler", "add_to_manager", "next_status"]
