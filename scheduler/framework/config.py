"""Scheduler configuration: profiles, the plugins each enables, their weights and arguments.

The file format follows KubeSchedulerConfiguration where it can, so the shape is familiar:

```yaml
percentageOfNodesToScore: 0        # 0: adaptive, as kube-scheduler (50% − nodes/125, at least 5%)
profiles:
  - schedulerName: tessera-scheduler
    plugins:
      multiPoint:                  # enabled at every extension point the plugin implements
        enabled: [{name: DeviceShare, weight: 2}]
        disabled: [{name: NodeAffinity}]     # or {name: "*"} for none of the defaults
      score:                       # per extension point: disable or re-weight there only
        disabled: [{name: NodeResourcesFit}]
    pluginConfig:
      - name: DeviceShare
        args: {scoringStrategy: {type: MostAllocated}}
```

Parsing checks the shape and reports every problem at once in one ConfigError; plugin
arguments stay raw mappings here and are checked by each plugin's `new()` when the framework is
built — also at start-up, never in a cycle. Which plugins are enabled by default is not known
here: the registry's owner passes that list to `runtime.Framework.build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from apis.errors import ConfigError
from apis.extension import names
from scheduler.framework.interfaces import ExtensionPoint

__all__ = [
    "KUBE_DEFAULT_SCHEDULER",
    "PluginRef",
    "PluginSet",
    "ProfileConfig",
    "SchedulerConfig",
    "expect_no_args",
    "load_config",
    "parse_config",
]

#: The schedulerName the API server gives a pod that names none: kube-scheduler's. A real cluster
#: leaves those pods to kube-scheduler; `tessera up`, which has none, serves it as a profile too.
KUBE_DEFAULT_SCHEDULER = "default-scheduler"

_TOP_KEYS = frozenset({"apiVersion", "kind", "percentageOfNodesToScore", "profiles"})
_PROFILE_KEYS = frozenset({"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"})
_POINTS = {p.value: p for p in ExtensionPoint}


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    #: Score weight; None keeps the default (the multiPoint weight, else 1).
    weight: int | None = None
    #: False in a default plugin that runs at every point but Score unless a profile enables
    #: it under `score` (NodeResourcesFit and DeviceShare: their resource scores would fight
    #: the default placement, GPUFragmentation's). Always True in a profile's own lists.
    score: bool = True


@dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    #: Names disabled; "*" disables every default.
    disabled: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    scheduler_name: str = names.SCHEDULER_NAME
    multi_point: PluginSet = PluginSet()
    points: Mapping[ExtensionPoint, PluginSet] = field(default_factory=dict)
    #: Plugin name -> raw arguments, parsed by the plugin's `new()`.
    plugin_args: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    #: Overrides the top-level setting for this profile.
    percentage_of_nodes_to_score: int | None = None


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    profiles: tuple[ProfileConfig, ...] = (ProfileConfig(),)
    #: 0: adaptive; 100: every feasible node is scored.
    percentage_of_nodes_to_score: int = 0

    def profile(self, scheduler_name: str) -> ProfileConfig | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)

    def percentage_for(self, profile: ProfileConfig) -> int:
        pct = profile.percentage_of_nodes_to_score
        return self.percentage_of_nodes_to_score if pct is None else pct


def load_config(text: str) -> SchedulerConfig:
    """Parse a YAML configuration. Raises ConfigError listing every problem."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"scheduler config is not valid YAML: {e}") from None
    return parse_config(doc if doc is not None else {})


def parse_config(doc: object) -> SchedulerConfig:
    """Build a SchedulerConfig from parsed YAML/JSON. Raises ConfigError listing every problem."""
    problems: list[str] = []
    if not isinstance(doc, Mapping):
        raise ConfigError("scheduler config: expected a mapping at the top level")
    _unknown_keys(doc, _TOP_KEYS, "", problems)
    pct = _percentage(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore", problems)
    raw_profiles = doc.get("profiles")
    profiles: list[ProfileConfig] = []
    if raw_profiles is None:
        profiles.append(ProfileConfig())
    elif not isinstance(raw_profiles, list) or not raw_profiles:
        problems.append("profiles: expected a non-empty list")
    else:
        for i, raw in enumerate(raw_profiles):
            profile = _profile(raw, f"profiles[{i}]", problems)
            if profile is not None:
                profiles.append(profile)
        seen: set[str] = set()
        for p in profiles:
            if p.scheduler_name in seen:
                problems.append(f"profiles: schedulerName {p.scheduler_name!r} appears twice")
            seen.add(p.scheduler_name)
    if problems:
        raise ConfigError("invalid scheduler config: " + "; ".join(problems))
    return SchedulerConfig(tuple(profiles), pct or 0)


def _unknown_keys(d: Mapping[object, object], allowed: frozenset[str], where: str, problems: list[str]) -> None:
    for key in d:
        if key not in allowed:
            problems.append(f"{where}{key}: unknown field (allowed: {', '.join(sorted(allowed))})")


def _percentage(raw: object, where: str, problems: list[str]) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 100:
        problems.append(f"{where}: expected an integer in 0..100, got {raw!r}")
        return None
    return raw


def _profile(raw: object, where: str, problems: list[str]) -> ProfileConfig | None:
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping")
        return None
    _unknown_keys(raw, _PROFILE_KEYS, f"{where}.", problems)
    name = raw.get("schedulerName", names.SCHEDULER_NAME)
    if not isinstance(name, str) or not name:
        problems.append(f"{where}.schedulerName: expected a non-empty string")
        name = names.SCHEDULER_NAME
    multi_point = PluginSet()
    points: dict[ExtensionPoint, PluginSet] = {}
    plugins = raw.get("plugins")
    if plugins is not None:
        if not isinstance(plugins, Mapping):
            problems.append(f"{where}.plugins: expected a mapping")
        else:
            for key, value in plugins.items():
                set_where = f"{where}.plugins.{key}"
                if key == "multiPoint":
                    multi_point = _plugin_set(value, set_where, problems)
                elif key in _POINTS:
                    points[_POINTS[key]] = _plugin_set(value, set_where, problems)
                else:
                    problems.append(f"{set_where}: unknown extension point")
    return ProfileConfig(
        scheduler_name=name,
        multi_point=multi_point,
        points=points,
        plugin_args=_plugin_args(raw.get("pluginConfig"), f"{where}.pluginConfig", problems),
        percentage_of_nodes_to_score=_percentage(
            raw.get("percentageOfNodesToScore"), f"{where}.percentageOfNodesToScore", problems
        ),
    )


def _plugin_set(raw: object, where: str, problems: list[str]) -> PluginSet:
    if raw is None:
        return PluginSet()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with enabled/disabled lists")
        return PluginSet()
    _unknown_keys(raw, frozenset({"enabled", "disabled"}), f"{where}.", problems)
    enabled = tuple(_refs(raw.get("enabled"), f"{where}.enabled", problems, weights=True))
    disabled = frozenset(ref.name for ref in _refs(raw.get("disabled"), f"{where}.disabled", problems, weights=False))
    return PluginSet(enabled, disabled)


def _refs(raw: object, where: str, problems: list[str], *, weights: bool) -> list[PluginRef]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{where}: expected a list of {{name: ...}}")
        return []
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            problems.append(f"{where}[{i}]: expected {{name: <plugin>}}")
            continue
        weight = item.get("weight")
        if weight is not None:
            if not weights:
                problems.append(f"{where}[{i}].weight: not allowed here")
                weight = None
            elif isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
                problems.append(f"{where}[{i}].weight: expected a positive integer, got {weight!r}")
                weight = None
        out.append(PluginRef(item["name"], weight))
    return out


def _plugin_args(raw: object, where: str, problems: list[str]) -> dict[str, Mapping[str, object]]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        problems.append(f"{where}: expected a list of {{name, args}}")
        return {}
    out: dict[str, Mapping[str, object]] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.append(f"{where}[{i}]: expected {{name: <plugin>, args: {{...}}}}")
            continue
        args = item.get("args") or {}
        if not isinstance(args, Mapping):
            problems.append(f"{where}[{i}].args: expected a mapping")
            continue
        if item["name"] in out:
            problems.append(f"{where}[{i}]: arguments for {item['name']} given twice")
        out[item["name"]] = dict(args)
    return out


def expect_no_args(plugin: str, args: Mapping[str, object] | None) -> None:
    """For plugins without arguments: raise ConfigError if some were given."""
    if args:
        raise ConfigError(f"{plugin} takes no arguments, got {', '.join(sorted(args))}")
