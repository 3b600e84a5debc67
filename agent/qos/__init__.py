"""Node QoS: cgroup enforcement per QoS class, BE CPU suppression, memory QoS, network QoS.

The agent process constructs `QoSHookPlugin` (for the hook server), `Reconciler`, `BESuppressor`
(with a `CgroupUsageSampler`) and `NetworkQoS` from a `QoSConfig` (`load_config`) and the node's
`KubeCgroups`; the loops have `start()`/`stop()`. docs/qos.md shows the wiring.

Modules: `convert` (pure unit conversions), `knobs` (v1/v2 files per setting), `cgroups`
(hierarchy, read/write), `layout` (kubepods naming), `config` (NodeSLO), `policy` (pod →
settings), `enforce` (write order the kernel accepts), `reconciler`, `hook`, `usage` and
`suppress` (BE CPU suppression), `netqos` (tc HTB), `pods` (the PodSource / PodLookup seams);
for the agent process, `nodeslo` (the node's NodeSLO object, watched), `sources` (which config
is in force: the object, the file, the defaults) and `node` (which parts run).
"""

from typing import TYPE_CHECKING

from agent.qos.cgroups import Cgroup, CgroupError, CgroupNotFound, CgroupUnsupported, Hierarchy
from agent.qos.config import QoSConfig
from agent.qos.config import load as load_config_text
from agent.qos.config import load_file as load_config
from agent.qos.knobs import CgroupVersion, CPUMax
from agent.qos.layout import Driver, KubeCgroups
from agent.qos.pods import PodLookup, PodSource
from agent.qos.reconciler import Reconciler, ReconcileReport
from agent.qos.suppress import BESuppressor
from agent.qos.usage import CgroupUsageSampler, Sampler, UsageSample
from kube.lazyexports import lazy_exports

if TYPE_CHECKING:
    from agent.qos.hook import QoSHookPlugin
    from agent.qos.netqos import NetworkQoS, NetworkQoSError

__all__ = [
    "BESuppressor",
    "CPUMax",
    "Cgroup",
    "CgroupError",
    "CgroupNotFound",
    "CgroupUnsupported",
    "CgroupUsageSampler",
    "CgroupVersion",
    "Driver",
    "Hierarchy",
    "KubeCgroups",
    "NetworkQoS",
    "NetworkQoSError",
    "PodLookup",
    "PodSource",
    "QoSConfig",
    "QoSHookPlugin",
    "ReconcileReport",
    "Reconciler",
    "Sampler",
    "UsageSample",
    "load_config",
    "load_config_text",
]


#: Loaded on first use: network QoS needs pyroute2 (about 8 MiB), the hook plugin the runtime
#: API's protobuf messages (about 4 MiB); an agent without them never pays for either.
__getattr__ = lazy_exports(
    __name__,
    {
        "NetworkQoS": "agent.qos.netqos",
        "NetworkQoSError": "agent.qos.netqos",
        "QoSHookPlugin": "agent.qos.hook",
    },
)
