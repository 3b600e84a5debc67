"""A packing plan: which shares of one GPU the target workload should put together on a GPU.

Why. FGD looks one pod ahead: a share goes where it costs the workload least usable GPU now.
That pairs shares by what happens to be open when they come. On the Alibaba trace it puts a
0.23 share beside a 0.65 one (0.12 left, which almost nothing fits) where the 0.65 was the only
partner for the 0.32 shares that come later (0.97 together), and then opens new GPUs for those.
With the mix of share sizes known in advance, online bin packing has a better rule: solve the
packing of the mix once, and let each share join only GPUs whose contents, with it, still
belong to a set of that solution (47 + 47, 65 + 32, 81 + 16, 55 + 23 + 22, …). Rules of that
kind approach the offline packing as the number of items grows; docs/scheduling.md measures it.

The plan is built from the workload's single-GPU shares, scaled to `_ITEMS` items, by greedy
best completion: the largest share left opens a GPU, and the fullest combination of the shares
left completes it (a bounded knapsack over the GPU's remaining percent). A GPU's contents are
not known to the measure, only how much of it is used, so the plan is kept as the pairs
(used percent, share) it allows: a share of s may join a GPU with u used when some set of the
plan holds s beside shares summing to u (u = 0: a free GPU). Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.fragmentation.shapes import WHOLE_GPU, TaskShape

__all__ = ["PackingPlan"]

#: Shares the plan packs: enough that a share of 1 in 2,000 pods still has its set.
_ITEMS = 2000


class PackingPlan:
    """Which (used percent, share percent) placements keep a GPU on the plan."""

    __slots__ = ("allowed", "sets", "sizes")

    def __init__(self, sets: Mapping[tuple[int, ...], int]) -> None:
        #: The plan: sets of share percents (ascending) that fill one GPU, with how many GPUs.
        self.sets = dict(sets)
        #: Share percents the plan knows; a share of another size is never off the plan.
        self.sizes = frozenset(s for combo in self.sets for s in combo)
        allowed: set[tuple[int, int]] = set()
        for combo in self.sets:
            for share in set(combo):
                beside = list(combo)
                beside.remove(share)
                allowed.update((used, share) for used in _subtotals(beside))
        self.allowed = frozenset(allowed)

    @classmethod
    def of(cls, shapes: Iterable[tuple[TaskShape, int]]) -> PackingPlan:
        """The plan for the single-GPU shares among `shapes` (weights: relative counts)."""
        weights: dict[int, int] = {}
        for shape, weight in shapes:
            if shape.uses_gpu and shape.gpus == 1 and shape.gpu_percent < WHOLE_GPU and weight > 0:
                weights[shape.gpu_percent] = weights.get(shape.gpu_percent, 0) + weight
        total = sum(weights.values())
        counts = {s: max(1, round(w * _ITEMS / total)) for s, w in weights.items()} if total else {}
        return cls(_best_completion(counts))

    def on_plan(self, used: int, share: int) -> bool:
        """Whether a share of `share` percent joining a GPU with `used` percent used keeps it on
        the plan (always, for a share the plan does not know)."""
        return share not in self.sizes or (used, share) in self.allowed


def _best_completion(counts: Mapping[int, int]) -> dict[tuple[int, ...], int]:
    """Greedy best completion: the largest share left opens a GPU and the combination of the
    shares left that fills most of the rest completes it (of combinations filling as much, the
    one built first from the largest shares down)."""
    left = {s: c for s, c in counts.items() if c > 0}
    sets: dict[tuple[int, ...], int] = {}
    while left:
        largest = max(left)
        _take(left, largest)
        room = WHOLE_GPU - largest
        # best[u]: the shares that fill exactly u of the room, found first with the largest shares
        best: dict[int, tuple[int, ...]] = {0: ()}
        for share in sorted(left, reverse=True):
            for _ in range(min(left[share], room // share)):
                grown = {u + share: (*combo, share) for u, combo in best.items() if u + share <= room}
                fresh = {u: combo for u, combo in grown.items() if u not in best}
                if not fresh:
                    break
                best.update(fresh)
        completion = best[max(best)]
        for share in completion:
            _take(left, share)
        combo = tuple(sorted((largest, *completion)))
        sets[combo] = sets.get(combo, 0) + 1
    return sets


def _subtotals(shares: Sequence[int]) -> set[int]:
    """Every sum of some of `shares` (0 included): at most 101 values, however many shares a set
    of small ones holds (enumerating the subsets themselves would be 2^n)."""
    sums = {0}
    for share in shares:
        sums |= {total + share for total in sums}
    return sums


def _take(left: dict[int, int], share: int) -> None:
    left[share] -= 1
    if not left[share]:
        del left[share]
