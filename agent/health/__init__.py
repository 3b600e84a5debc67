"""Device health: evidence from NVML and sysfs, a tracker with recovery, and the loop running it.

`HealthTracker` (`tracker.py`) holds each device's `Health` and calls subscribers on change;
`HealthMonitor` (`monitor.py`) runs the NVML XID watcher (`nvml_events.py`, with the XID table
in `xid.py`) and the RDMA port probe (`rdma_ports.py`) on one thread.
"""

from agent.health.clock import Clock, ManualClock, SystemClock
from agent.health.monitor import HealthMonitor
from agent.health.tracker import Health, HealthCallback, HealthTracker
from agent.health.xid import XID_TABLE, XidAction

__all__ = [
    "XID_TABLE",
    "Clock",
    "Health",
    "HealthCallback",
    "HealthMonitor",
    "HealthTracker",
    "ManualClock",
    "SystemClock",
    "XidAction",
]
