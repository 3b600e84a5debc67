"""The quota tree's rules as pure functions returning precise messages (empty: valid).

The same checks serve the admission webhook (refuse a bad quota before it is stored) and the
scheduler (a quota stored before the webhook existed is reported, never crashes anything):

- max ≥ min for every resource;
- the parent exists and is a parent (`is-parent: "true"`); no quota is its own ancestor;
- the children's mins, summed, fit within the parent's min (the root is exempt: its total is
  the cluster's);
- `is-parent` cannot flip while the quota has children;
- a parent quota holds no pods (checked when a pod resolves to one: `pod_on_parent`).
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.k8s import resources
from apis.quota.tree import OUTSIDE_TREE, ROOT_QUOTA_NAME, QuotaSpec

__all__ = ["pod_on_parent", "validate_tree", "validate_update"]


def validate_tree(specs: Mapping[str, QuotaSpec]) -> dict[str, list[str]]:
    """Every rule broken, per quota name (quotas without problems are absent)."""
    problems: dict[str, list[str]] = {}
    children: dict[str, list[QuotaSpec]] = {}
    for spec in specs.values():
        children.setdefault(spec.parent, []).append(spec)
    for spec in specs.values():
        found = _own_rules(spec) + _parent_rules(spec, specs)
        kids = children.get(spec.name, [])
        if kids and spec.name != ROOT_QUOTA_NAME:
            found += _children_min_rule(spec, kids)
        if found:
            problems[spec.name] = found
    return problems


def validate_update(old: QuotaSpec | None, new: QuotaSpec, specs: Mapping[str, QuotaSpec]) -> list[str]:
    """What is wrong with storing `new` (replacing `old`, None on create) among `specs`."""
    others = {n: s for n, s in specs.items() if n != new.name}
    found = _own_rules(new) + _parent_rules(new, {**others, new.name: new})
    children = sorted(n for n, s in others.items() if s.parent == new.name)
    if old is not None and old.is_parent != new.is_parent and children:
        found.append(
            f"quota {new.name}: is-parent cannot change from {str(old.is_parent).lower()} to "
            f"{str(new.is_parent).lower()} while it has children ({', '.join(children)})"
        )
    if new.parent and new.parent != ROOT_QUOTA_NAME and new.parent in others:
        siblings = [s for s in others.values() if s.parent == new.parent]
        found += _children_min_rule(others[new.parent], [*siblings, new])
    if children:
        found += _children_min_rule(new, [others[c] for c in children])
    return found


def pod_on_parent(spec: QuotaSpec) -> str | None:
    """Why a pod may not use this quota, or None."""
    if spec.is_parent:
        return f"quota {spec.name} is a parent quota (is-parent: true): pods must use one of its children"
    return None


def _own_rules(spec: QuotaSpec) -> list[str]:
    return [
        f"quota {spec.name}: min[{r}] {resources.format_quantity(r, amount)} exceeds "
        f"max[{r}] {resources.format_quantity(r, spec.max[r])}"
        for r, amount in sorted(spec.min.items())
        if r in spec.max and amount > spec.max[r]
    ]


def _parent_rules(spec: QuotaSpec, specs: Mapping[str, QuotaSpec]) -> list[str]:
    if spec.name == ROOT_QUOTA_NAME or spec.name in OUTSIDE_TREE or spec.parent in ("", ROOT_QUOTA_NAME):
        return []
    if spec.parent == spec.name:
        return [f"quota {spec.name}: a quota cannot be its own parent"]
    parent = specs.get(spec.parent)
    if parent is None:
        return [f"quota {spec.name}: parent quota {spec.parent} does not exist"]
    found = []
    if not parent.is_parent:
        found.append(f'quota {spec.name}: parent quota {spec.parent} is not a parent (is-parent is not "true")')
    seen = [spec.name]
    node: QuotaSpec | None = parent
    while node is not None and node.parent not in ("", ROOT_QUOTA_NAME):
        seen.append(node.name)
        if node.name == spec.name or node.parent in seen:
            found.append(f"quota {spec.name}: parent chain forms a cycle ({' -> '.join([*seen, node.parent])})")
            break
        node = specs.get(node.parent)
    return found


def _children_min_rule(parent: QuotaSpec, children: list[QuotaSpec]) -> list[str]:
    total = resources.sum_of(c.min for c in children)
    return [
        f"quota {parent.name}: children's min[{r}] sum to {resources.format_quantity(r, amount)}, "
        f"more than its min[{r}] {resources.format_quantity(r, parent.min.get(r, 0))} "
        f"(children: {', '.join(sorted(c.name for c in children))})"
        for r, amount in sorted(total.items())
        if amount > parent.min.get(r, 0)
    ]
