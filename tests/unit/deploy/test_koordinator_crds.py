"""Our CRDs of Koordinator's groups accept every object Koordinator's CRDs accept.

Koordinator's schemas are facts in fixtures/koordinator-crds.txt (hack/koordinator_crd_facts.py
writes them from Koordinator's config/crd/bases/). Each of our CRDs in deploy/crds/ (the Helm
chart's are the same files: test_helm.py) is walked, and every constraint of ours must be one of
Koordinator's at the same path, or looser:

- a keyword that only narrows (type, format, enum, pattern, minimum, maxLength, required, anyOf,
  x-kubernetes-validations, ...) must be Koordinator's, with a value at least as permissive;
- where Koordinator allows null (`nullable`), so must we;
- under a path Koordinator's schema does not know, we may keep the field (Koordinator prunes it)
  but not constrain it: an object Koordinator accepts would be refused;
- every field Koordinator keeps we keep (not pruned), and its defaults are ours.
Stricter checks that protect Tessera's promise belong in the components' parsers, with Events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
FACTS = Path(__file__).parent / "fixtures" / "koordinator-crds.txt"

#: Keywords that narrow what an object may be.
_NARROWING = frozenset(
    {
        "type",
        "format",
        "enum",
        "pattern",
        "multipleOf",
        "uniqueItems",
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "x-kubernetes-validations",
        "x-kubernetes-list-map-keys",
    }
)
_LOWER_BOUNDS = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"})
_UPPER_BOUNDS = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"})
#: List types that refuse duplicates (`atomic` refuses nothing).
_UNIQUE_LISTS = frozenset({"set", "map"})

Facts = dict[str, dict[str, dict[str, Any]]]  # crd/version -> path -> keyword -> value


def load_facts() -> Facts:
    out: Facts = {}
    for line in FACTS.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        crd, version, path, keyword, value = line.split(" ", 4)
        out.setdefault(f"{crd}/{version}", {}).setdefault(path, {})[keyword] = json.loads(value)
    return out


def our_crds() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """crd/version -> (version entry, schema) of every CRD in deploy/crds/."""
    out = {}
    for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for version in doc["spec"]["versions"]:
            out[f"{doc['metadata']['name']}/{version['name']}"] = (version, version["schema"]["openAPIV3Schema"])
    return out


def nodes(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, node) for the schema and every sub-schema, paths as in the facts file."""
    yield path or "-", schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], path + "{}")


def _ancestors(path: str) -> Iterator[str]:
    """`path`'s ancestors, nearest first (`.a.b[]` → `.a.b`, `.a`, `-`)."""
    while path not in ("", "-"):
        cut = max(path.rfind("."), path.rfind("["), path.rfind("{"))
        path = path[:cut]
        yield path or "-"


def _kept_by(known: Mapping[str, Mapping[str, Any]], path: str) -> bool:
    """Whether a schema keeps the field at `path`: it knows the path, or preserves unknown fields
    at it or above."""
    if path in known:
        return True
    return any(known.get(a, {}).get("x-kubernetes-preserve-unknown-fields") is True for a in _ancestors(path))


def extra_constraints(ours: Mapping[str, Any], theirs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every way `ours` refuses or alters an object `theirs` (path -> keyword -> value) accepts."""
    mine = dict(nodes(ours))
    found = []
    for path, node in mine.items():
        koord = theirs.get(path)
        if koord is None:
            narrowing = sorted(k for k in node if k in _NARROWING | _LOWER_BOUNDS | _UPPER_BOUNDS | {"required"})
            narrowing += [k for k in ("x-kubernetes-list-type",) if node.get(k) in _UNIQUE_LISTS]
            if narrowing and not _is_object_type_only(node, narrowing):
                found.append(
                    f"{path}: Koordinator does not know this field; ours constrains it ({', '.join(narrowing)})"
                )
            continue
        found += [f"{path}: {problem}" for problem in _narrower(node, koord)]
    for path, koord in theirs.items():
        if path != "-" and not _kept_by(mine, path):
            found.append(f"{path}: Koordinator keeps this field; ours prunes it")
        if "default" in koord and path in mine and mine[path].get("default") != koord["default"]:
            found.append(f"{path}: Koordinator defaults it to {koord['default']!r}; ours does not")
    return found


def _is_object_type_only(node: Mapping[str, Any], narrowing: list[str]) -> bool:
    """A `type: object` holding nothing but known-to-be-optional fields under a path Koordinator
    keeps whole (it preserves unknown fields there): allowed only with preserve-unknown."""
    return (
        narrowing == ["type"]
        and node.get("type") == "object"
        and bool(node.get("x-kubernetes-preserve-unknown-fields"))
    )


def _narrower(node: Mapping[str, Any], koord: Mapping[str, Any]) -> list[str]:
    out = []
    for key, value in node.items():
        theirs = koord.get(key)
        if key == "required":
            extra = sorted(set(value) - set(theirs or ()))
            if extra:
                out.append(f"requires {', '.join(extra)}; Koordinator does not")
        elif key == "enum":
            if theirs is None or not set(map(json.dumps, value)) <= set(map(json.dumps, theirs)):
                out.append(f"enum {value}; Koordinator's: {theirs}")
        elif key in _LOWER_BOUNDS:
            if theirs is None or value > theirs:
                out.append(f"{key} {value}; Koordinator's: {theirs}")
        elif key in _UPPER_BOUNDS:
            if theirs is None or value < theirs:
                out.append(f"{key} {value}; Koordinator's: {theirs}")
        elif key == "x-kubernetes-list-type":
            if value in _UNIQUE_LISTS and value != theirs:
                out.append(f"list type {value}; Koordinator's: {theirs}")
        elif key in _NARROWING and value != theirs:
            out.append(f"{key} {json.dumps(value)}; Koordinator's: {json.dumps(theirs)}")
    if koord.get("nullable") is True and node.get("nullable") is not True:
        out.append("refuses null; Koordinator allows it")
    return out


FACTS_BY_CRD = load_facts()
OURS = our_crds()
KOORDINATOR_GROUPS = sorted(
    k
    for k in OURS
    if k.split("/")[0].split(".", 1)[1]
    in {
        "scheduling.koordinator.sh",
        "scheduling.sigs.k8s.io",
        "slo.koordinator.sh",
    }
)


def test_every_crd_of_koordinators_groups_has_its_facts() -> None:
    assert sorted(FACTS_BY_CRD) == KOORDINATOR_GROUPS


@pytest.mark.parametrize("crd", KOORDINATOR_GROUPS)
def test_no_constraint_of_ours_is_stricter_than_koordinators(crd: str) -> None:
    facts = {
        path: {k: v for k, v in keywords.items() if k != "subresources"} for path, keywords in FACTS_BY_CRD[crd].items()
    }
    assert extra_constraints(OURS[crd][1], facts) == []


@pytest.mark.parametrize("crd", KOORDINATOR_GROUPS)
def test_the_status_subresource_is_where_koordinator_has_it(crd: str) -> None:
    """Device, ElasticQuota and PodGroup have none in Koordinator's CRDs: a Koordinator component
    merge-patching their status through the object must not have it dropped (our components write
    status either way: kube.status)."""
    assert OURS[crd][0].get("subresources", {}) == FACTS_BY_CRD[crd]["-"]["subresources"]


def test_the_check_finds_what_koordinator_would_accept_and_we_refuse() -> None:
    """The comparison itself, on a small schema: each kind of narrowing is reported."""
    theirs = {
        "-": {"type": "object"},
        ".minor": {"type": "integer", "format": "int32"},
        ".kind": {"type": "string"},
        ".health": {"type": "boolean", "default": False},
        ".ref": {"type": "string", "nullable": True},
    }
    ours = {
        "type": "object",
        "required": ["minor"],
        "properties": {
            "minor": {"type": "integer", "format": "int32", "minimum": 0},
            "kind": {"type": "string", "enum": ["gpu"]},
            "health": {"type": "boolean"},
            "ref": {"type": "string"},
            "extra": {"type": "string"},
        },
    }
    assert extra_constraints(ours, theirs) == [
        "-: requires minor; Koordinator does not",
        ".minor: minimum 0; Koordinator's: None",
        ".kind: enum ['gpu']; Koordinator's: None",
        ".ref: refuses null; Koordinator allows it",
        ".extra: Koordinator does not know this field; ours constrains it (type)",
        ".health: Koordinator defaults it to False; ours does not",
    ]
    assert extra_constraints({"type": "object", "properties": {"minor": {"type": "integer"}}}, theirs)[-1] == (
        ".ref: Koordinator keeps this field; ours prunes it"
    )
