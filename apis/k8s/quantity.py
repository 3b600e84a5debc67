"""Kubernetes resource quantities, exactly.

Quantities (`100m`, `16Gi`, `1.5`, `2e3`, `1k`) arrive as strings from every object Tessera reads.
They are parsed here once into an exact rational (`fractions.Fraction`), so no amount ever drifts
the way a float would, and formatted back in the canonical form kube-apiserver produces (`1.5` →
`1500m`, `1024Mi` → `1Gi`, `2000` → `2k`). Business code does not keep Quantity objects around:
it converts them to integers in base units (`milli_value()` for CPU, `value()` for everything
else) via `apis.k8s.resources`.

Rules followed (from k8s.io/apimachinery resource.Quantity):
- grammar: `[+-]digits[.digits](suffix)` with suffix one of n u m "" k M G T P E, Ki..Ei, or
  `e<int>`/`E<int>`; the format (DecimalSI, BinarySI, DecimalExponent) follows the suffix;
- precision is nano: finer amounts are rounded up, away from zero;
- `value()` / `milli_value()` round up (ceil);
- canonical output: BinarySI only for whole amounts of at least 1024 (else DecimalSI), with the
  largest power-of-1024 suffix that divides exactly; decimal forms use the largest multiple-of-3
  exponent (n..E) that leaves an integer mantissa.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from apis.errors import QuantityError

__all__ = ["Format", "Quantity", "parse"]


class Format(enum.Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {power // 10: suffix for suffix, power in _BINARY_SUFFIXES.items()}

_GRAMMAR = re.compile(r"([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)([a-zA-Z]*)([+-]?[0-9]*)")
_MAX_TEXT = 128  # a quantity longer than this is not a quantity but an attack
_MAX_EXPONENT = 100  # |e| beyond this would build enormous integers for no real use
_NANO = Fraction(1, 10**9)


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """An exact amount and the format it was written in. Compares and hashes by amount."""

    amount: Fraction
    format: Format = Format.DECIMAL_SI

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        return cls(Fraction(value), fmt)

    @classmethod
    def from_milli(cls, milli: int) -> Quantity:
        return cls(Fraction(milli, 1000), Format.DECIMAL_SI)

    def value(self) -> int:
        """The amount rounded up to an integer, like Quantity.Value()."""
        return math.ceil(self.amount)

    def milli_value(self) -> int:
        """The amount in thousandths, rounded up, like Quantity.MilliValue()."""
        return math.ceil(self.amount * 1000)

    def is_zero(self) -> bool:
        return self.amount == 0

    def __str__(self) -> str:
        return _format(self.amount, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.amount == other.amount
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.amount)

    def __lt__(self, other: Quantity) -> bool:
        return self.amount < other.amount

    def __le__(self, other: Quantity) -> bool:
        return self.amount <= other.amount

    def __gt__(self, other: Quantity) -> bool:
        return self.amount > other.amount

    def __ge__(self, other: Quantity) -> bool:
        return self.amount >= other.amount

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.amount + other.amount, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.amount - other.amount, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.amount, self.format)


def parse(text: object) -> Quantity:
    """Parse a quantity from its string form or a JSON number.

    Raises QuantityError (and nothing else) for anything that is not a quantity.
    """
    if isinstance(text, bool):
        raise QuantityError(text, "a boolean is not a quantity")
    if isinstance(text, int):
        return Quantity(Fraction(text), Format.DECIMAL_SI)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(text, "must be a finite number")
        text = repr(text)
    if not isinstance(text, str):
        raise QuantityError(text, f"expected a string or a number, got {type(text).__name__}")
    if not text:
        raise QuantityError(text, "empty string")
    if len(text) > _MAX_TEXT:
        raise QuantityError(text[:32] + "...", f"longer than {_MAX_TEXT} characters")
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise QuantityError(text, "does not match the quantity grammar <number><suffix>")
    sign, number, suffix, exponent_text = match.groups()
    amount, fmt = _scale(text, Fraction(number), suffix, exponent_text)
    if sign == "-":
        amount = -amount
    return Quantity(_round_to_nano(amount), fmt)


def _scale(text: str, number: Fraction, suffix: str, exponent_text: str) -> tuple[Fraction, Format]:
    if suffix in ("e", "E") and exponent_text not in ("", "+", "-"):
        exponent = int(exponent_text)
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(text, f"exponent beyond ±{_MAX_EXPONENT}")
        return number * Fraction(10) ** exponent, Format.DECIMAL_EXPONENT
    if exponent_text:
        raise QuantityError(text, f"unexpected {exponent_text!r} after suffix {suffix!r}")
    if suffix in _BINARY_SUFFIXES:
        return number * (1 << _BINARY_SUFFIXES[suffix]), Format.BINARY_SI
    if suffix in _DECIMAL_SUFFIXES:
        return number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    raise QuantityError(text, f"unknown suffix {suffix!r}")


def _round_to_nano(amount: Fraction) -> Fraction:
    if (amount / _NANO).denominator == 1:
        return amount
    nanos = math.ceil(abs(amount) / _NANO)
    return Fraction(nanos if amount > 0 else -nanos, 10**9)


def _format(amount: Fraction, fmt: Format) -> str:
    if amount == 0:
        return "0"
    if fmt is Format.BINARY_SI and abs(amount) >= 1024 and amount.denominator == 1:
        return _format_binary(amount.numerator)
    sign = "-" if amount < 0 else ""
    mantissa, exponent = _decimal_mantissa(abs(amount))
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    while exponent > 18:  # no suffix above E: keep the mantissa bigger
        mantissa *= 1000
        exponent -= 3
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def _format_binary(value: int) -> str:
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    power = 0
    while power < 6 and magnitude % 1024 == 0:
        magnitude //= 1024
        power += 1
    return f"{sign}{magnitude}{_BINARY_BY_POWER.get(power, '')}"


def _decimal_mantissa(amount: Fraction) -> tuple[int, int]:
    """Return (m, e) with amount == m * 10**e, e a multiple of 3 >= -9, e as large as possible."""
    scaled = amount * 10**9  # exact: amounts are kept at nano precision
    mantissa, exponent = scaled.numerator // scaled.denominator, -9
    while mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    return mantissa, exponent
