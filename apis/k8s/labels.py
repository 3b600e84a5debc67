"""Label selectors: the structured form (metav1.LabelSelector) and the string form (`a=b,c in (x)`).

One implementation serves the API server (list/watch `labelSelector`), the scheduler (device hint
selectors, node affinity) and the CLI, so all of them agree on what a selector matches.
Semantics as Kubernetes: `!=` and `notin` match objects without the key; an empty selector
matches everything; `Gt`/`Lt` compare integers and never match a non-integer value.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apis import _fields as f
from apis.errors import ValidationError

__all__ = ["LabelSelector", "Operator", "Requirement", "Selector", "parse_selector"]


class Operator(enum.Enum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        if op is Operator.NOT_IN:
            return labels.get(self.key) not in self.values
        value = labels.get(self.key)
        if value is None:
            return False
        if op is Operator.IN:
            return value in self.values
        try:
            actual, bound = int(value), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return actual > bound if op is Operator.GT else actual < bound

    @classmethod
    def from_dict(cls, raw: object, field: str, obj: str = "", *, allow_gt_lt: bool = False) -> Requirement:
        d = f.mapping(raw, field, obj)
        key = f.string(d, "key", field, obj)
        if not key:
            raise ValidationError(f"{field}.key", "must not be empty", obj=obj)
        op_text = f.string(d, "operator", field, obj)
        try:
            op = Operator(op_text)
        except ValueError:
            raise ValidationError(f"{field}.operator", f"unknown operator {op_text!r}", obj=obj) from None
        if op in (Operator.GT, Operator.LT) and not allow_gt_lt:
            raise ValidationError(f"{field}.operator", f"{op.value} is not allowed here", obj=obj)
        values = f.strings(d, "values", field, obj)
        _check_values(op, values, field, obj)
        return cls(key, op, values)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator.value}
        if self.values:
            out["values"] = list(self.values)
        return out


def _check_values(op: Operator, values: tuple[str, ...], field: str, obj: str) -> None:
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        raise ValidationError(f"{field}.values", f"{op.value} needs at least one value", obj=obj)
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        raise ValidationError(f"{field}.values", f"{op.value} takes no values", obj=obj)
    if op in (Operator.GT, Operator.LT) and (len(values) != 1 or not re.fullmatch(r"-?[0-9]+", values[0])):
        raise ValidationError(f"{field}.values", f"{op.value} needs exactly one integer value", obj=obj)


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements; matches when all do."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def is_empty(self) -> bool:
        return not self.requirements


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector."""

    match_labels: Mapping[str, str]
    match_expressions: tuple[Requirement, ...] = ()

    @property
    def selector(self) -> Selector:
        reqs = [Requirement(k, Operator.IN, (v,)) for k, v in sorted(self.match_labels.items())]
        return Selector((*reqs, *self.match_expressions))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.selector.matches(labels)

    @classmethod
    def from_dict(cls, raw: object, field: str = "selector", obj: str = "") -> LabelSelector:
        d = f.mapping(raw, field, obj)
        return cls(
            match_labels=f.string_map(d, "matchLabels", field, obj),
            match_expressions=tuple(
                Requirement.from_dict(e, f"{field}.matchExpressions[{i}]", obj)
                for i, e in enumerate(f.items(d, "matchExpressions", field, obj))
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty(
            {
                "matchLabels": dict(self.match_labels),
                "matchExpressions": [e.to_dict() for e in self.match_expressions],
            }
        )


# --- the string form -------------------------------------------------------------------------------
_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)
_SET_RE = re.compile(rf"\s*({_KEY})\s+(in|notin)\s*\((.*?)\)\s*")
_CMP_RE = re.compile(rf"\s*({_KEY})\s*(==|=|!=|>|<)\s*(\S*?)\s*")
_EXISTS_RE = re.compile(rf"\s*(!?)\s*({_KEY})\s*")


def parse_selector(text: str) -> Selector:
    """Parse the string form used in `?labelSelector=` and `kubectl -l`.

    Raises ValidationError (field `labelSelector`) naming the part that does not parse.
    """
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        if not part.strip():
            if text.strip():
                raise ValidationError("labelSelector", f"empty requirement in {text!r}")
            continue
        requirements.append(_parse_requirement(part))
    return Selector(tuple(requirements))


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( … )`."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parse_requirement(part: str) -> Requirement:
    if m := _SET_RE.fullmatch(part):
        key, op, raw_values = m.group(1), m.group(3), m.group(4)
        values = tuple(sorted({v.strip() for v in raw_values.split(",")}))
        for value in values:
            _check_label_value(value, part)
        operator = Operator.IN if op == "in" else Operator.NOT_IN
        return Requirement(key, operator, values)
    if m := _CMP_RE.fullmatch(part):
        key, op, value = m.group(1), m.group(3), m.group(4)
        if op in (">", "<"):
            if not re.fullmatch(r"-?[0-9]+", value):
                raise ValidationError("labelSelector", f"{part.strip()!r}: {op} needs an integer")
            return Requirement(key, Operator.GT if op == ">" else Operator.LT, (value,))
        _check_label_value(value, part)
        return Requirement(key, Operator.NOT_IN if op == "!=" else Operator.IN, (value,))
    if m := _EXISTS_RE.fullmatch(part):
        operator = Operator.DOES_NOT_EXIST if m.group(1) else Operator.EXISTS
        return Requirement(m.group(2), operator)
    raise ValidationError("labelSelector", f"cannot parse requirement {part.strip()!r}")


def _check_label_value(value: str, part: str) -> None:
    if len(value) > 63 or not _VALUE_RE.fullmatch(value):
        raise ValidationError("labelSelector", f"{part.strip()!r}: invalid label value {value!r}")
