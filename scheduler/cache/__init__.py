"""The scheduler's view of the cluster: nodes, pods and device usage, fed by explicit calls.

The bottom layer of the scheduler: it imports only `apis`. See `cache.py` for the contract.
"""

from scheduler.cache.budgets import DisruptionBudgets
from scheduler.cache.cache import DEFAULT_ASSUMED_TTL, ClusterCache
from scheduler.cache.devices import DeviceHolder, DeviceState, DeviceUsage, Holding, NodeDevices, Overcommit
from scheduler.cache.holdings import DeviceAllocatedAnnotation, Held, Holdings, HoldingsSource
from scheduler.cache.nodeinfo import NodeInfo
from scheduler.cache.nominator import Nominator
from scheduler.cache.podinfo import PodInfo
from scheduler.cache.snapshot import CacheSnapshot
from scheduler.cache.templates import SharedResourceTemplates

__all__ = [
    "DEFAULT_ASSUMED_TTL",
    "CacheSnapshot",
    "ClusterCache",
    "DeviceAllocatedAnnotation",
    "DeviceHolder",
    "DeviceState",
    "DeviceUsage",
    "DisruptionBudgets",
    "Held",
    "Holding",
    "Holdings",
    "HoldingsSource",
    "NodeDevices",
    "NodeInfo",
    "Nominator",
    "Overcommit",
    "PodInfo",
    "SharedResourceTemplates",
]
