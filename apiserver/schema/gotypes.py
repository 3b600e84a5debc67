"""How kube-apiserver's decoder judges a value against a built-in kind's Go field, and words a no.

kube-apiserver decodes a built-in kind's body into its Go types (encoding/json's rules, as
sigs.k8s.io/json keeps them) before anything else happens to it: a value of the wrong JSON type
is refused with 400 BadRequest, naming the struct, the field path and the Go type (`json: cannot
unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`), whatever the
request's `fieldValidation`, and nothing is stored. A server that stored `replicas: "3"` would
hand it to every controller, which would choke on it later or, worse, read it differently. The
pruning walk (`prune.decode`) asks `refusal` about every field it knows; this module holds Go's
judgement, read off the compiled definitions of `builtin.json`:

- null is always taken: an absent field (`zero` is what Go keeps for a null map value or list item);
- a struct or a map wants an object, a slice an array, a string a string, a bool a bool;
- an integer wants a JSON integer in its Go type's range: `3.0` and `3.5` are refused as `number
  3.0`, as is 3000000000 for an int32;
- IntOrString takes a string or an int32, Quantity a string or a number that parses as a
  quantity (`cpu: 1`, `cpu: 0.5`), Time and MicroTime a string that Go's `time.Parse` takes
  with their layouts (`gotime`): kube's own `UnmarshalJSON`s, whose errors end decoding at once
  (`fatal`), where a plain mismatch is remembered and decoding goes on, so a later fatal error
  is the one kube reports.

Messages are kube's words. Where kube's own decoders name no field (IntOrString, Quantity,
Time: `json: cannot unmarshal bool into Go value of type int32`), the field is named here as Go
names it in its other messages, because a manifest has many ports and quantities.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from apis.errors import QuantityError
from apis.k8s import quantity
from apiserver.schema import gotime
from apiserver.schema.structural import Structural

__all__ = ["INT_OR_STRING", "MICRO_TIME", "QUANTITY", "TIME", "DecodeError", "Refusal", "go_type", "refusal", "zero"]

INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
MICRO_TIME: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_FORMAT_WRONG: Final = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_SUFFIX: Final = "unable to parse quantity's suffix"
_NUMERIC: Final = "unable to parse numeric part of quantity"
#: kube's shape of a quantity: text outside it is the format error, inside it a bad suffix or number.
_SHAPE: Final = re.compile(r"[+-]?[0-9.]+[eEinumkKMGTP]*[-+]?[0-9]*")
_RANGES: Final = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_SHOWN: Final = 64
_B64: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_NEWLINES: Final = frozenset(b"\r\n")
_PAD: Final = ord("=")


class DecodeError(ValueError):
    """The body cannot be decoded into the kind's Go types; the text is kube's detail (after
    `Deployment in version "v1" cannot be handled as a Deployment: `)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a value does not decode into a field: Go's name for what it got (`string`, `number
    3.5`) and for the type it wanted, or a custom decoder's own reason."""

    got: str
    want: str
    fatal: bool = False
    reason: str = ""
    #: The value, shown after a custom decoder's reason that does not show it itself (JSON).
    shown: str = ""

    def message(self, owner: str, field: str) -> str:
        """The detail, with the field as Go names it: the struct that holds the last named field
        and the JSON names from the root, without list indices or map keys."""
        where = f"Go struct field {owner}.{field}" if owner and field else "Go value"
        if self.reason:
            shown = f": {self.shown}" if self.shown else ""
            return f"{self.reason} ({where} of type {self.want}{shown})"
        return f"json: cannot unmarshal {self.got} into {where} of type {self.want}"


def _show(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def go_type(schema: Structural) -> str:
    """The Go type of a field, as reflect prints it: `int32`, `[]v1.Container`, `map[string]string`."""
    if schema.definition:
        package, _, name = schema.definition.rpartition(".")
        return f"{package.rpartition('.')[2]}.{name}"
    match schema.type:
        case "array":
            return "[]" + (go_type(schema.items) if schema.items is not None else "interface {}")
        case "object":
            extra = schema.additional
            return "map[string]" + (go_type(extra) if isinstance(extra, Structural) else "interface {}")
        case "integer":
            return schema.format or "int64"
        case "number":
            return "float64"
        case "boolean":
            return "bool"
        case "string":
            return "[]uint8" if schema.format == "byte" else "string"
    return "interface {}"


def _got(value: Any) -> str:
    """Go's name for a JSON value's kind, in `cannot unmarshal <got> into`."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


def _integer(value: Any, want: str) -> str:
    """What is wrong with `value` for an integer of Go type `want`; "" when nothing."""
    if type(value) is int:
        low, high = _RANGES.get(want, _RANGES["int64"])
        return "" if low <= value <= high else f"number {value}"
    if type(value) is float:
        return f"number {value!r}"  # Go parses the literal as an integer: 3.0 and 1e3 fail too
    return _got(value)


@functools.lru_cache(maxsize=1024)
def _quantity_problem(text: str) -> str:
    # Cached: pods repeat the same few quantities, and parsing one costs microseconds.
    try:
        quantity.parse(text)
    except QuantityError as e:
        if not _SHAPE.fullmatch(text.strip()):
            return _FORMAT_WRONG
        return _SUFFIX if "suffix" in e.reason else _NUMERIC
    return ""


def _quantity(value: Any) -> Refusal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        problem = _FORMAT_WRONG  # kube parses the raw JSON (`true`, `{...}`) as a quantity's text
    else:
        problem = _quantity_problem(value if isinstance(value, str) else repr(value))
    return Refusal("", "resource.Quantity", fatal=True, reason=problem, shown=_show(value)) if problem else None


def _base64_error(data: bytes) -> int:
    """Where Go's base64.StdEncoding.Decode fails on `data` (-1: it does not), as its
    CorruptInputError counts: padding required, `\r` and `\n` skipped anywhere."""
    i, n = 0, len(data)
    while i < n:
        j = 0  # the position in the current quantum of four
        while j < 4:
            if i == n:
                return -1 if j == 0 else i - j
            c = data[i]
            i += 1
            if c in _NEWLINES:
                continue
            if c in _B64:
                j += 1
                continue
            if c != _PAD or j < 2:
                return i - 1
            if j == 2:  # "==" is expected: the first "=" is consumed
                while i < n and data[i] in _NEWLINES:
                    i += 1
                if i == n:
                    return n
                if data[i] != _PAD:
                    return i - 1
                i += 1
            while i < n and data[i] in _NEWLINES:
                i += 1
            return i if i < n else -1  # anything after the padding is trailing garbage
    return -1


def _time(value: Any, definition: str) -> Refusal | None:
    """metav1.Time and MicroTime: a string Go's time.Parse takes (`gotime`), whose error names the value."""
    if not isinstance(value, str):
        return Refusal(_got(value), "string", fatal=True)  # they read the JSON into a string first
    problem = gotime.problem(value, micro=definition == MICRO_TIME)
    want = "v1.MicroTime" if definition == MICRO_TIME else "v1.Time"
    return Refusal("", want, fatal=True, reason=problem) if problem else None


def refusal(schema: Structural, value: Any) -> Refusal | None:
    """Why `value` (not None) does not decode into a field of `schema`; None when it does.
    Untyped nodes (`x-kubernetes-preserve-unknown-fields`: RawExtension, JSON) take anything."""
    kind = schema.type
    if kind == "object":
        if isinstance(value, dict):
            return None
    elif kind == "string":
        definition = schema.definition
        if not definition:
            if not isinstance(value, str):
                return Refusal(_got(value), go_type(schema))
            if schema.format == "byte" and (at := _base64_error(value.encode())) >= 0:
                return Refusal("", "[]uint8", reason=f"illegal base64 data at input byte {at}")
            return None
        if definition == QUANTITY:
            return _quantity(value)
        if definition == INT_OR_STRING:
            if isinstance(value, str):
                return None
            got = _integer(value, "int32")
            return Refusal(got, "int32", fatal=True) if got else None
        if definition in (TIME, MICRO_TIME):
            return _time(value, definition)
        return None if isinstance(value, str) else Refusal(_got(value), go_type(schema))
    elif kind == "array":
        if isinstance(value, list):
            return None
    elif kind == "integer":
        got = _integer(value, schema.format)
        return Refusal(got, go_type(schema)) if got else None
    elif kind == "boolean":
        if isinstance(value, bool):
            return None
    elif kind == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
    else:
        return None
    return Refusal(_got(value), go_type(schema))


def zero(schema: Structural) -> Any:
    """What Go keeps for a null map value or list item of `schema` (`labels: {a: null}` is
    `a: ""`); None where Go's zero value is itself written as null."""
    if schema.definition == QUANTITY:
        return "0"
    if schema.definition == INT_OR_STRING:
        return 0
    if schema.definition in (TIME, MICRO_TIME):
        return None  # Go writes a zero Time as null
    match schema.type:
        case "string":
            return ""
        case "integer" | "number":
            return 0
        case "boolean":
            return False
        case "object":
            return {} if schema.properties else None
    return None
