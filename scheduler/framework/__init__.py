"""The scheduling framework: extension points, statuses, cycle state, configuration, runtime.

Sits between the cache (below) and the plugins (above): plugins subclass the ABCs in
`interfaces`, and `runtime.Framework` runs them with an injected registry, so this package
never imports a plugin.
"""

from scheduler.framework.config import PluginRef, PluginSet, ProfileConfig, SchedulerConfig, load_config, parse_config
from scheduler.framework.cycle_state import CycleState, StateData
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.interfaces import ExtensionPoint, Handle, PreFilterResult
from scheduler.framework.runtime import Framework, PointObserver, Registry, ScheduleResult, ScoreTable
from scheduler.framework.status import SKIP, SUCCESS, Code, Shortfall, Status
from scheduler.framework.waiting import WaitingPod
from scheduler.framework.writes import ObjectWrite, PodAnnotations, Write, Writes

__all__ = [
    "SKIP",
    "SUCCESS",
    "Code",
    "CycleState",
    "Diagnosis",
    "ExtensionPoint",
    "Framework",
    "Handle",
    "ObjectWrite",
    "PluginRef",
    "PluginSet",
    "PodAnnotations",
    "PointObserver",
    "PreFilterResult",
    "ProfileConfig",
    "Registry",
    "ScheduleResult",
    "SchedulerConfig",
    "ScoreTable",
    "Shortfall",
    "StateData",
    "Status",
    "WaitingPod",
    "Write",
    "Writes",
    "load_config",
    "parse_config",
]
