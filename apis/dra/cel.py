"""CEL device selectors, as kube evaluates them (k8s.io/dynamic-resource-allocation/cel).

A DeviceClass's and a request's `selectors[].cel.expression` are evaluated against one device at
a time, as the variable `device`:

    device.driver                          the driver's name (string)
    device.allowMultipleAllocations        bool
    device.attributes["<domain>"].<id>     int, bool, string, semver, or a list of one of those
    device.capacity["<domain>"].<id>       a Kubernetes quantity

An attribute or capacity named without a domain belongs to the driver's domain, and looking up a
domain the device does not have gives an empty map (so `has(device.attributes["x"].y)` is false,
not an error), as kube does. Besides standard CEL: `cel.bind`, optional values
(`device.attributes["d"].?x.orValue(0)`), the strings extension, and
Kubernetes' quantity (`quantity("1Gi")`, `isQuantity`, `compareTo`, `isGreaterThan`,
`isLessThan`, `add`, `sub`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`) and semver
(`semver("1.2.3")`, `isSemver`, `compareTo`, `isGreaterThan`, `isLessThan`, `major`, `minor`,
`patch`) libraries. Kube's other libraries (lists, regex `find`, url, ip, cidr, format) are not
provided: an expression using them is a compile error naming the function, never a wrong answer.

The CEL implementation is `cel-expr-python`, the CEL team's Python binding of cel-cpp (the C++
reference implementation): it type-checks against declared variables (a misspelt `devic.driver`
is a compile error, as in kube), is maintained with the spec, and has no Python dependency.
Expressions are compiled once per `Compiler` (a bounded cache keyed by the text: classes and
claims repeat the same few expressions) and a compile error is kept in the cache too. Each
(expression, device) is evaluated once too: the answer (or the runtime error) is kept while the
device object lives in a bounded cache — the scheduler asks the same selectors of the same
devices on every node it filters for every pod. `Compiler.evaluations`, `evaluation_seconds`
and `cached` count the work (what `tessera bench scheduler` reports per node).

Cost: kube refuses an expression whose estimated cost exceeds 1,000,000 and stops one that
exceeds it at run time. cel-cpp here has no cost estimator we can reach; the bound is instead its
comprehension iteration budget (10,000 iterations per evaluation, across nested macros) and
kube's 10 KiB limit on the text, so a runaway expression (nested `all`/`exists`/`map` over large
lists) stops with `CELCostError` after bounded work, and the claim gets that error.

Limitation: the empty-map default for a missing domain is given for every domain written as a
string literal in the expression (the literals are added as empty maps); iterating over
`device.attributes`' keys may therefore also see those empty domains.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from apis.dra.claim import CEL_SELECTOR_EXPRESSION_MAX_LENGTH
from apis.dra.slice import AttributeType, Device, DeviceAttribute
from apis.errors import QuantityError, TesseraError
from apis.k8s import quantity as qmod

__all__ = ["CELCompileError", "CELCostError", "CELError", "CELRuntimeError", "Compiler", "Program", "device_variable"]

#: kube's CELSelectorExpressionMaxCost: quoted in messages; what bounds work here is the budget.
ITERATION_BUDGET = 10_000
_CACHE_SIZE = 1024
_ACTIVATIONS = 4096  # devices' converted variables kept (a few nodes' worth)
_RESULTS = 1 << 16  # (expression, device) answers kept (thousands of nodes' worth)


class CELError(TesseraError):
    """A selector expression could not be used; `expression` is the text, `reason` why."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(reason)
        self.expression = expression
        self.reason = reason


class CELCompileError(CELError):
    """The expression does not parse, type-check, or evaluate to bool."""


class CELRuntimeError(CELError):
    """Evaluating the expression on a device failed (a missing key, a wrong type, ...)."""


class CELCostError(CELRuntimeError):
    """The expression did more work than the budget allows (a runaway expression)."""


# --- Kubernetes' quantity and semver types, as protobuf messages cel-cpp can carry -------------

_PACKAGE = "tessera.cel.kubernetes"


def _descriptor_pool() -> descriptor_pool.DescriptorPool:
    fdp = descriptor_pb2.FileDescriptorProto(name="tessera/cel/kubernetes.proto", package=_PACKAGE, syntax="proto3")
    for name in ("Quantity", "Semver"):
        msg = fdp.message_type.add(name=name)
        msg.field.add(
            name="value",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)  # type: ignore[no-untyped-call]  # protobuf's descriptor_pool is untyped
    return pool


_POOL = _descriptor_pool()
_QuantityMsg = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.Quantity"))  # type: ignore[no-untyped-call]
_SemverMsg = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.Semver"))  # type: ignore[no-untyped-call]
_Q = cel.Type(f"{_PACKAGE}.Quantity")
_S = cel.Type(f"{_PACKAGE}.Semver")
_T = cel.Type


def _q(amount: Fraction) -> message.Message:
    """A quantity as CEL sees it: one exact, normalised value, so `==` compares amounts."""
    return _QuantityMsg(value=f"{amount.numerator}/{amount.denominator}")


def _amount(msg: Any) -> Fraction:
    return Fraction(msg.value)


@functools.lru_cache(maxsize=1024)
def _parse_quantity(text: str) -> message.Message:
    """quantity("..."): cached, as selectors repeat the same few literals on every device."""
    try:
        return _q(qmod.parse(text).amount)
    except QuantityError as e:
        raise ValueError(f"quantity({text!r}): {e.reason}") from None


def _is_quantity(text: str) -> bool:
    try:
        qmod.parse(text)
    except QuantityError:
        return False
    return True


def _cmp(a: Fraction, b: Fraction) -> int:
    return (a > b) - (a < b)


def _as_integer(q: Any) -> int:
    amount = _amount(q)
    if amount.denominator != 1 or not -(2**63) <= amount.numerator < 2**63:
        raise ValueError("asInteger: the quantity is not an integer that fits in int64")
    return amount.numerator


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def _semver_parts(text: str) -> tuple[int, int, int, tuple[str, ...]]:
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"semver({text!r}): not a semantic version")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _semver(text: str) -> message.Message:
    _semver_parts(text)
    return _SemverMsg(value=text)


def _is_semver(text: str) -> bool:
    return _SEMVER.match(text) is not None


def _semver_cmp(a: Any, b: Any) -> int:
    """Semantic Versioning 2.0.0 precedence (build metadata ignored)."""
    *core_a, pre_a = _semver_parts(a.value)
    *core_b, pre_b = _semver_parts(b.value)
    if core_a != core_b:
        return -1 if core_a < core_b else 1
    if pre_a == pre_b:
        return 0
    if not pre_a or not pre_b:
        return 1 if not pre_a else -1  # a release is above its pre-releases
    for x, y in zip(pre_a, pre_b, strict=False):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return -1 if int(x) < int(y) else 1
        if x.isdigit() != y.isdigit():
            return -1 if x.isdigit() else 1
        return -1 if x < y else 1
    return -1 if len(pre_a) < len(pre_b) else 1


def _kind(value: Any) -> str:
    name = getattr(getattr(value, "DESCRIPTOR", None), "name", "")
    return name if name in ("Quantity", "Semver") else type(value).__name__


def _compare(a: Any, b: Any) -> int:
    """compareTo between two quantities or two semvers."""
    kinds = (_kind(a), _kind(b))
    if kinds == ("Quantity", "Quantity"):
        return _cmp(_amount(a), _amount(b))
    if kinds == ("Semver", "Semver"):
        return _semver_cmp(a, b)
    raise ValueError(f"no comparison of {kinds[0]} with {kinds[1]} (quantity with quantity, semver with semver)")


def _functions() -> list[cel.FunctionDecl]:
    def fn(name: str, *overloads: cel.Overload) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, list(overloads))

    def ov(oid: str, ret: cel.Type, params: list[cel.Type], impl: Any, *, member: bool = False) -> cel.Overload:
        return cel.Overload(oid, ret, params, is_member=member, impl=impl)

    def decl(oid: str, ret: cel.Type) -> cel.Overload:
        return cel.Overload(oid, ret, [_S, _S], is_member=True)  # implemented by the quantity overload

    return [
        fn("quantity", ov("string_to_quantity", _Q, [_T.STRING], _parse_quantity)),
        fn("isQuantity", ov("is_quantity_string", _T.BOOL, [_T.STRING], _is_quantity)),
        # Typed for the checker (a quantity compares with a quantity, a semver with a semver);
        # cel-cpp's runtime tells overloads apart by kind and both are messages, so one
        # implementation serves both and dispatches on the message type.
        fn(
            "compareTo",
            ov("quantity_compareTo", _T.INT, [_Q, _Q], _compare, member=True),
            decl("semver_compareTo", _T.INT),
        ),
        fn(
            "isGreaterThan",
            ov("quantity_isGreaterThan", _T.BOOL, [_Q, _Q], lambda a, b: _compare(a, b) > 0, member=True),
            decl("semver_isGreaterThan", _T.BOOL),
        ),
        fn(
            "isLessThan",
            ov("quantity_isLessThan", _T.BOOL, [_Q, _Q], lambda a, b: _compare(a, b) < 0, member=True),
            decl("semver_isLessThan", _T.BOOL),
        ),
        fn(
            "add",
            ov("quantity_add_quantity", _Q, [_Q, _Q], lambda a, b: _q(_amount(a) + _amount(b)), member=True),
            ov("quantity_add_int", _Q, [_Q, _T.INT], lambda a, b: _q(_amount(a) + b), member=True),
        ),
        fn(
            "sub",
            ov("quantity_sub_quantity", _Q, [_Q, _Q], lambda a, b: _q(_amount(a) - _amount(b)), member=True),
            ov("quantity_sub_int", _Q, [_Q, _T.INT], lambda a, b: _q(_amount(a) - b), member=True),
        ),
        fn("sign", ov("quantity_sign", _T.INT, [_Q], lambda a: _cmp(_amount(a), Fraction(0)), member=True)),
        fn("isInteger", ov("quantity_isInteger", _T.BOOL, [_Q], lambda a: _amount(a).denominator == 1, member=True)),
        fn("asInteger", ov("quantity_asInteger", _T.INT, [_Q], _as_integer, member=True)),
        fn(
            "asApproximateFloat",
            ov("quantity_asApproximateFloat", _T.DOUBLE, [_Q], lambda a: float(_amount(a)), member=True),
        ),
        fn("semver", ov("string_to_semver", _S, [_T.STRING], _semver)),
        fn("isSemver", ov("is_semver_string", _T.BOOL, [_T.STRING], _is_semver)),
        fn("major", ov("semver_major", _T.INT, [_S], lambda a: _semver_parts(a.value)[0], member=True)),
        fn("minor", ov("semver_minor", _T.INT, [_S], lambda a: _semver_parts(a.value)[1], member=True)),
        fn("patch", ov("semver_patch", _T.INT, [_S], lambda a: _semver_parts(a.value)[2], member=True)),
    ]


# --- the `device` variable -----------------------------------------------------------------------


def _attribute_value(attr: DeviceAttribute) -> Any:
    def one(v: int | bool | str) -> Any:
        return _SemverMsg(value=v) if attr.type is AttributeType.VERSION else v

    return [one(v) for v in attr.values] if attr.is_list else one(attr.value)


def _by_domain(names: Mapping[str, Any], driver: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, value in names.items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        out.setdefault(domain, {})[ident] = value
    return out


def device_variable(device: Device, driver: str) -> dict[str, Any]:
    """The `device` variable's value for one device of `driver`'s (without missing-domain maps)."""
    return {
        "driver": driver,
        "allowMultipleAllocations": device.allow_multiple_allocations,
        "attributes": _by_domain({k: _attribute_value(a) for k, a in device.attributes.items()}, driver),
        "capacity": _by_domain({k: _q(c.value.amount) for k, c in device.capacity.items()}, driver),
    }


# A CEL string literal (no raw/bytes prefixes matter here: only plain domain names are wanted).
_STRING_LITERAL = re.compile(r"\"\"\"(.*?)\"\"\"|'''(.*?)'''|\"((?:\\.|[^\"\\\n])*)\"|'((?:\\.|[^'\\\n])*)'", re.S)


def _literals(expression: str) -> frozenset[str]:
    out = set()
    for m in _STRING_LITERAL.finditer(expression):
        text = next(g for g in m.groups() if g is not None)
        if text and "\\" not in text:
            out.add(text)
    return frozenset(out)


class _Evaluator:
    """Evaluates compiled selectors on devices, each (expression, device) once while the device
    lives: the answers are kept by the device's identity (the entry keeps the device, so its id
    cannot be reused meanwhile), as are the devices' `device` variables, converted for cel-cpp
    once (converting one is most of an evaluation's cost). Counts its work."""

    def __init__(self, env: cel.Env, *, activations: int = _ACTIVATIONS, results: int = _RESULTS) -> None:
        self._env = env
        self._activations_size = activations
        self._results_size = results
        self._activations: OrderedDict[tuple[int, str, frozenset[str], int], tuple[Device, cel.Activation]] = (
            OrderedDict()
        )
        self._results: dict[tuple[str, int, str], tuple[Device, bool | CELRuntimeError]] = {}
        self.evaluations = 0
        self.seconds = 0.0
        self.cached = 0

    def matches(self, program: Program, device: Device, driver: str) -> bool:
        key = (program.expression, id(device), driver)
        hit = self._results.get(key)
        if hit is not None and hit[0] is device:
            self.cached += 1
            answer = hit[1]
        else:
            start = time.perf_counter()
            try:
                answer = program.evaluate(self._activation(device, driver, program.domains))
            except CELRuntimeError as e:
                answer = e
            self.seconds += time.perf_counter() - start
            self.evaluations += 1
            if len(self._results) >= self._results_size:
                self._results.clear()  # a miss costs one evaluation again
            self._results[key] = (device, answer)
        if isinstance(answer, CELRuntimeError):
            raise answer.with_traceback(None)
        return answer

    def _activation(self, device: Device, driver: str, domains: frozenset[str]) -> cel.Activation:
        # per thread too: cel-cpp's activation lives in the arena of the thread that made it, and
        # used from another thread fails ("No PyCelArena found for google::protobuf::Arena")
        key = (id(device), driver, domains, threading.get_ident())
        hit = self._activations.get(key)
        if hit is not None and hit[0] is device:
            self._activations.move_to_end(key)
            return hit[1]
        var = device_variable(device, driver)
        for by_domain in (var["attributes"], var["capacity"]):
            for domain in domains:
                by_domain.setdefault(domain, {})
        activation = self._env.Activation(data={"device": var})
        self._activations[key] = (device, activation)
        if len(self._activations) > self._activations_size:
            self._activations.popitem(last=False)
        return activation


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled selector: `matches(device, driver)` is whether the device is selected."""

    expression: str
    _compiled: cel.Expression
    domains: frozenset[str]
    _evaluator: _Evaluator

    def matches(self, device: Device, driver: str) -> bool:
        """Raises CELRuntimeError (CELCostError past the budget); never another exception.
        Evaluated once per device (object) while the compiler keeps the answer."""
        return self._evaluator.matches(self, device, driver)

    def evaluate(self, activation: cel.Activation) -> bool:
        """One evaluation, uncached (raises as `matches`)."""
        try:
            result = self._compiled.eval(activation)
        except RuntimeError as e:
            text = str(e)
            if "budget" in text.lower():
                raise CELCostError(
                    self.expression,
                    f"evaluation exceeded the budget of {ITERATION_BUDGET} comprehension iterations: {_clean(text)}",
                ) from None
            raise CELRuntimeError(self.expression, _clean(text)) from None
        except Exception as e:  # a library function of ours raised (bad quantity text, ...)
            raise CELRuntimeError(self.expression, _clean(str(e))) from None
        if result.type() == cel.Type.ERROR:
            raise CELRuntimeError(self.expression, _clean(str(result.value())))
        value = result.value()
        if not isinstance(value, bool):
            raise CELRuntimeError(self.expression, f"must evaluate to bool, got {result.type().name().lower()}")
        return value


def _clean(text: str) -> str:
    """cel-cpp's status text without its code prefix/suffix and caret art, on one line."""
    text = re.sub(r"^[A-Z_]+: ", "", text.strip())
    text = re.sub(r" \[[A-Z_]+\]$", "", text)
    first = text.splitlines()[0] if text else text
    return first.removeprefix("ERROR: ").removeprefix("<input>:")


class Compiler:
    """Compiles selector expressions once each, and evaluates each on each device once; share
    one per scheduling loop (not thread-safe: its caches are plain dicts)."""

    def __init__(self, *, cache_size: int = _CACHE_SIZE) -> None:
        self._env = cel.NewEnv(
            descriptor_pool=_POOL,
            variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
            extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings()],
            functions=_functions(),
        )
        self._cache: OrderedDict[str, Program | CELCompileError] = OrderedDict()
        self._evaluator = _Evaluator(self._env)
        self._cache_size = cache_size
        self.compilations = 0  # how many expressions were compiled (not served from the cache)

    @property
    def evaluations(self) -> int:
        """How many (expression, device) evaluations ran (not served from the cache)."""
        return self._evaluator.evaluations

    @property
    def evaluation_seconds(self) -> float:
        """Time spent in those evaluations (converting the device included)."""
        return self._evaluator.seconds

    @property
    def cached(self) -> int:
        """How many answers were served from the cache."""
        return self._evaluator.cached

    def compile(self, expression: str) -> Program:
        """The compiled program; raises CELCompileError (also on a repeat: errors are cached)."""
        hit = self._cache.get(expression)
        if hit is None:
            hit = self._compile(expression)
            self._cache[expression] = hit
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(expression)
        if isinstance(hit, CELCompileError):
            raise hit
        return hit

    def _compile(self, expression: str) -> Program | CELCompileError:
        self.compilations += 1
        if len(expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            return CELCompileError(
                expression, f"{len(expression)} characters, more than the {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} allowed"
            )
        try:
            compiled = self._env.compile(expression)
        except RuntimeError as e:
            return CELCompileError(expression, f"compilation failed: {_clean(str(e))}")
        out = compiled.return_type()
        if out not in (cel.Type.BOOL, cel.Type.DYN):
            return CELCompileError(expression, f"must evaluate to bool, not {out.name().lower()}")
        return Program(expression, compiled, _literals(expression), self._evaluator)
