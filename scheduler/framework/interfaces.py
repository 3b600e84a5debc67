"""The extension points: one small abstract class each, as in kube-scheduler's framework.

A plugin subclasses only the points it uses (`class DeviceShare(PreFilterPlugin, FilterPlugin,
ScorePlugin, ReservePlugin, PreBindPlugin)`), so mypy checks every signature. The runtime
(`runtime.Framework`) calls them in this order for one pod:

    PreFilter → Filter (per node) → [PostFilter if no node fits] → PreScore → Score (per node,
    then normalize, times weight) → Reserve → Permit → PreBind → Bind → PostBind
    (Unreserve, in reverse order, when anything after Reserve fails)

Contracts, as kube-scheduler's:
- Filter and Score read only the NodeInfo they are given and the cycle state; no I/O, no
  mutation. A Filter is safe to call again for the same node (diagnosis does).
- PreFilter may narrow the nodes worth looking at (`PreFilterResult.node_names`) and may return
  SKIP, which skips its own Filter for this pod; PreScore likewise with SKIP for Score.
- Reserve may update shared state (the cache) and must be undone by Unreserve, which is
  idempotent and must not fail.
- Permit returns SUCCESS, WAIT (with a timeout; the runtime keeps the pod waiting until a plugin
  allows or rejects it, or the time is up) or a rejection.
- PreBind returns the API writes to make before binding (`writes`: the pod's annotations,
  another object's patch with its undo); whoever binds makes them — the live binder on its own
  threads, out of the cycle and without the cache lock, so PreBind reads only the pod and what
  earlier points recorded in the cycle state (or plugin state that no longer changes), never
  the cache. Bind returns SKIP to let the next binder (or the caller) bind.
- Filter/Score plugins that can say what of the pod their results depend on (`memo_key`) let
  the runtime reuse per-node results across pods of the same shape; what changes Score results
  only, for every node at once, is a `score_epoch` (Filter results survive it).
- A raised exception is a bug: the runtime turns it into an ERROR status, logs the stack and
  keeps the cycle loop alive.

Two extensions are not points of the cycle but hooks around it, for plugins that reason about
sets of pods (gang scheduling): `PodSetExtension` is told about every pod the scheduler
sees, pending ones included (what else defines a set, a PodGroup, the plugin watches through
`Handle.feeds`), and `QueueSortExtension` names the set a pending pod must
be dequeued with. Plugins reach the pods held at Permit through `Handle.waiting` (to allow or
reject a whole gang at once).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, TypeVar, cast

from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.events import ClusterEvent, EventAction, EventResource
from scheduler.framework.feeds import Feeds
from scheduler.framework.status import Status
from scheduler.framework.waiting import WaitingPod
from scheduler.framework.writes import Write

__all__ = [
    "Access",
    "BindPlugin",
    "ClusterEvent",
    "EnqueueExtension",
    "EventAction",
    "EventResource",
    "ExtensionPoint",
    "FilterPlugin",
    "Handle",
    "NodeCheck",
    "PermitPlugin",
    "Plugin",
    "PodSetExtension",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PreBindPlugin",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortExtension",
    "ReservePlugin",
    "ScorePlugin",
]

_T = TypeVar("_T")

#: Scores are integers in [0, MAX_NODE_SCORE] after normalization.
MAX_NODE_SCORE = 100


class NodeCheck(Protocol):
    """The profile's own PreFilter and Filter chains, for a plugin that must ask whether a pod
    would fit a node it changed on a copy (preemption: the node without its victims), as kube's
    framework handle offers (RunPreFilterPlugins, RunFilterPlugins). The Framework gives every
    plugin its own at construction; calling it before the profile's plugins are all built raises
    RuntimeError."""

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Every PreFilter of the profile; SUCCESS or the first rejection."""
        ...

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The profile's Filter chain on `node` (the Filters PreFilter skipped left out)."""
        ...


class _NoFramework:
    """The `NodeCheck` of a Handle made outside a Framework (a plugin built alone, in a test)."""

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        raise RuntimeError("this plugin was built outside a Framework: it has no profile to check nodes with")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        raise RuntimeError("this plugin was built outside a Framework: it has no profile to check nodes with")


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin gets from the framework at construction: the shared cache, its profile, the
    scheduler's feeds (`feeds`: the informers it needs and the events it emits) and what plugins
    share."""

    cache: ClusterCache
    profile: str
    #: Objects the plugins of one profile share, created by the first that asks (`shared_object`):
    #: plugins never import each other, so what two of them keep in common is named by a key
    #: from the framework module that defines it (e.g. `fragmentation.shared_learner`).
    shared: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)
    #: Objects every profile's plugins share, one per scheduler (`scheduler_object`: the quota
    #: manager the ElasticQuota plugins of all profiles fill and charge).
    scheduler: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)
    #: The scheduler's feeds (`scheduler.framework.feeds`), one for every profile.
    feeds: Feeds = field(default_factory=Feeds, compare=False, repr=False)
    #: The pods held at Permit, by `PodInfo.ident`: owned by the framework, which adds and
    #: removes them; a plugin only allows or rejects them (a gang all at once).
    waiting: dict[str, WaitingPod] = field(default_factory=dict, compare=False, repr=False)
    #: The profile's PreFilter and Filter chains (`NodeCheck`), given by the Framework.
    check: NodeCheck = field(default_factory=_NoFramework, compare=False, repr=False)

    def shared_object(self, key: Hashable, factory: Callable[[], _T], kind: type[_T]) -> _T:
        """The object under `key`, made by `factory()` on first use. Raises TypeError when
        the object under `key` is not a `kind` (two modules using one key: a bug)."""
        return _get_or_make(self.shared, key, factory, kind)

    def scheduler_object(self, key: Hashable, factory: Callable[[], _T], kind: type[_T]) -> _T:
        """As `shared_object`, among every profile's plugins."""
        return _get_or_make(self.scheduler, key, factory, kind)


def _get_or_make(objects: dict[Hashable, object], key: Hashable, factory: Callable[[], _T], kind: type[_T]) -> _T:
    found = objects.get(key)
    if found is None:
        found = objects[key] = factory()
    if not isinstance(found, kind):
        raise TypeError(f"shared object {key!r} is a {type(found).__name__}, not a {kind.__name__}")
    return found


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Nodes worth filtering for this pod; None means all. Every other node is known to fail
    this plugin's Filter (the runtime filters them only to explain a failure)."""

    node_names: frozenset[str] | None = None


class ExtensionPoint(enum.Enum):
    PRE_FILTER = "preFilter"
    FILTER = "filter"
    POST_FILTER = "postFilter"
    PRE_SCORE = "preScore"
    SCORE = "score"
    RESERVE = "reserve"
    PERMIT = "permit"
    PRE_BIND = "preBind"
    BIND = "bind"
    POST_BIND = "postBind"


@dataclass(frozen=True, slots=True)
class Access:
    """A plugin's part in a shared cycle-state entry (`scheduler.framework.shared`): the entry,
    and the extension point where it writes it, or first reads it."""

    key: StateKey[object]
    point: ExtensionPoint

    @classmethod
    def of(cls, key: StateKey[_T], point: ExtensionPoint) -> Access:
        """The access to `key`, whatever its value type (only the key's identity is compared)."""
        return cls(cast("StateKey[object]", key), point)


class Plugin(abc.ABC):
    """Every plugin has a name, unique in the registry, used in config, statuses and logs."""

    name: ClassVar[str]
    #: The shared cycle-state entries this plugin writes, each at the point that writes it.
    writes: ClassVar[tuple[Access, ...]] = ()
    #: The shared entries it reads, each at the first point that reads it: `Framework.build`
    #: refuses a profile that runs it there before their writer.
    reads: ClassVar[tuple[Access, ...]] = ()

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """A key such that this plugin's Filter and Score results on a node depend only on the
        key and on that NodeInfo; None (the default) when no such key exists.

        Called after PreFilter. When every Filter and Score plugin of a profile gives a key, the
        runtime reuses a node's results for later pods with the same keys until the node's
        `generation` changes — exact, not an approximation, as long as the key is honest.
        """
        return None

    def score_epoch(self, state: CycleState, pod: PodInfo) -> Hashable:
        """What, besides `memo_key` and the node, this plugin's Score results depend on that
        changes for every node at once and leaves Filter results as they were (a learned target
        workload's version): the runtime then keeps a node's Filter result across epochs and
        recomputes only its raw scores. Called after PreFilter; constant (None) by default.
        Without it such a value has to go into `memo_key`, and each new one refilters every
        node for every pod shape.
        """
        return None


class PreFilterPlugin(Plugin):
    @abc.abstractmethod
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Prepare per-pod data; reject a pod that can fit nowhere; or SKIP the Filter."""


class FilterPlugin(Plugin):
    @abc.abstractmethod
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Can the pod run on this node? SUCCESS or a rejection naming why."""


class PostFilterPlugin(Plugin):
    #: Runs after every other PostFilter of its profile, whatever the configured order: the
    #: cluster-wide preemption (DefaultPreemption) acts only when the narrower ones (a quota's,
    #: a gang's) did not, as kube and Koordinator order them.
    runs_last: ClassVar[bool] = False

    @abc.abstractmethod
    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        """Called when no node fits: may make room (preemption) and nominate a node."""


class PreScorePlugin(Plugin):
    @abc.abstractmethod
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        """Prepare scoring over the feasible nodes; SKIP skips this plugin's Score."""


class ScorePlugin(Plugin):
    #: Set to True when `normalize_scores` does something (saves a call per cycle otherwise).
    normalizes: ClassVar[bool] = False

    @abc.abstractmethod
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """Raw score of a feasible node; higher is better. Never rejects."""

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Rescale raw scores in place to [0, MAX_NODE_SCORE]."""
        return None


class ReservePlugin(Plugin):
    @abc.abstractmethod
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Claim what the pod needs on `node` before binding."""

    @abc.abstractmethod
    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo `reserve`. Idempotent; never fails."""


class PermitPlugin(Plugin):
    @abc.abstractmethod
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SUCCESS, WAIT (Status.wait(timeout)) or a rejection."""


class PreBindPlugin(Plugin):
    @abc.abstractmethod
    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        """The writes to make before the pod is bound on `node` (`scheduler.framework.writes`),
        and SUCCESS or why the binding must not go ahead. Runs on the binder's thread without
        the cache lock: reads the pod and the cycle state only (see the module docstring)."""


class BindPlugin(Plugin):
    @abc.abstractmethod
    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Bind the pod, or SKIP to leave it to the next binder."""


class PostBindPlugin(Plugin):
    @abc.abstractmethod
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Informational: the pod is bound."""


class EnqueueExtension(Plugin):
    @abc.abstractmethod
    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        """Cluster changes that may make a pod this plugin rejected schedulable."""


class PodSetExtension(Plugin):
    """Told about every pod the scheduler knows — pending, assumed and bound — so a plugin can
    count a set's members before any of them is scheduled (the objects that define a set, such
    as PodGroups, come from the plugin's own feeds). Adding a pod again updates it. Called under
    the cache lock; must not raise."""

    @abc.abstractmethod
    def pod_added(self, pod: Pod) -> None:
        """A pod was created or changed."""

    @abc.abstractmethod
    def pod_deleted(self, pod: Pod) -> None:
        """A pod is gone."""


class QueueSortExtension(Plugin):
    """Pending pods that must be dequeued one after another, not interleaved with others (a
    gang's members: two gangs interleaved could each hold half of what both need)."""

    @abc.abstractmethod
    def queue_group(self, pod: Pod) -> str | None:
        """The name of the set the pod is dequeued with, or None for a pod on its own."""


#: Which ABC implements which extension point.
POINT_CLASSES: Mapping[ExtensionPoint, type[Plugin]] = {
    ExtensionPoint.PRE_FILTER: PreFilterPlugin,
    ExtensionPoint.FILTER: FilterPlugin,
    ExtensionPoint.POST_FILTER: PostFilterPlugin,
    ExtensionPoint.PRE_SCORE: PreScorePlugin,
    ExtensionPoint.SCORE: ScorePlugin,
    ExtensionPoint.RESERVE: ReservePlugin,
    ExtensionPoint.PERMIT: PermitPlugin,
    ExtensionPoint.PRE_BIND: PreBindPlugin,
    ExtensionPoint.BIND: BindPlugin,
    ExtensionPoint.POST_BIND: PostBindPlugin,
}
