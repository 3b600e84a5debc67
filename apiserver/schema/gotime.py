"""Go's `time.Parse` of the two layouts kube's timestamps are decoded with, and its error text.

A built-in kind's `metav1.Time` field (`creationTimestamp`, a condition's `lastTransitionTime`)
is decoded with `time.Parse(time.RFC3339, s)` and a `metav1.MicroTime` (a Lease's `renewTime`,
an Event's `eventTime`) with `RFC3339Micro`, which wants exactly six digits of fraction: kube
refuses `renewTime: "2024-01-02T03:04:05Z"` with `parsing time "2024-01-02T03:04:05Z" as
"2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"`. `problem` says what Go says,
element by element as Go parses (a four-digit year, two-digit month and day, a one- or
two-digit hour, two-digit minutes and seconds, a fraction where the layout has one, or any
fraction after the seconds where it has none, then `Z` or `±hh:mm`), with Go's range checks.
Well-formed timestamps, nearly all of them, take one regular expression and a few comparisons.
"""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = ["LAYOUT", "MICRO_LAYOUT", "problem"]

LAYOUT: Final = "2006-01-02T15:04:05Z07:00"
MICRO_LAYOUT: Final = "2006-01-02T15:04:05.000000Z07:00"
_FAST: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:[.,]([0-9]+))?(?:Z|[+-]([0-9]{2}):([0-9]{2}))"
)
_DIGITS: Final = frozenset("0123456789")
_MONTH_DAYS: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days_in(month: int, year: int) -> int:
    """Go's daysIn (year 0 is a leap year too, where Python's calendar refuses it)."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 29 if month == 2 and leap else _MONTH_DAYS[month - 1]


def _quote(text: str) -> str:
    """Go's time.quote: double quotes, a backslash before `"` and `\\`."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Failed(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@functools.lru_cache(maxsize=1024)
def problem(value: str, *, micro: bool = False) -> str:
    """Go's error for parsing `value` with RFC3339 (`micro`: RFC3339Micro); "" when it parses."""
    fast = _FAST.fullmatch(value)
    if fast is not None and (not micro or len(fast.group(7) or "") == 6):
        year, month, day, hour, minute, second = (int(fast.group(i)) for i in range(1, 7))
        offset_ok = fast.group(8) is None or (int(fast.group(8)) <= 24 and int(fast.group(9)) <= 60)
        clock_ok = hour < 24 and minute < 60 and second < 60 and offset_ok
        if clock_ok and 1 <= month <= 12 and 1 <= day <= _days_in(month, year):
            return ""
    layout = MICRO_LAYOUT if micro else LAYOUT
    try:
        _slow(value, micro)
    except _Failed as e:
        if e.detail.startswith(":"):  # Go's ParseError with a message of its own: no layout
            return f"parsing time {_quote(value)}{e.detail}"
        return f"parsing time {_quote(value)} as {_quote(layout)}: {e.detail}"
    return ""


def _cannot(rest: str, element: str) -> _Failed:
    return _Failed(f"cannot parse {_quote(rest)} as {_quote(element)}")


def _number(rest: str, element: str, *, fixed: bool) -> tuple[int, str]:
    """Go's getnum: one or two digits (two when `fixed`)."""
    if not rest[:1] or rest[0] not in _DIGITS:
        raise _cannot(rest, element)
    if rest[1:2] and rest[1] in _DIGITS:
        return int(rest[:2]), rest[2:]
    if fixed:
        raise _cannot(rest, element)
    return int(rest[0]), rest[1:]


def _literal(rest: str, text: str) -> str:
    if not rest.startswith(text):
        raise _cannot(rest, text)
    return rest[len(text) :]


def _ranged(value: int, low: int, high: int, name: str) -> None:
    if not low <= value <= high:
        raise _Failed(f": {name} out of range")


def _slow(value: str, micro: bool) -> None:
    """Walk the layout's elements as Go's Parse does; raise _Failed with Go's detail."""
    rest = value
    if len(rest) < 4 or not all(c in _DIGITS for c in rest[:4]):
        raise _cannot(rest, "2006")
    year, rest = int(rest[:4]), rest[4:]
    rest = _literal(rest, "-")
    month, rest = _number(rest, "01", fixed=True)
    _ranged(month, 1, 12, "month")
    rest = _literal(rest, "-")
    day, rest = _number(rest, "02", fixed=True)
    rest = _literal(rest, "T")
    hour, rest = _number(rest, "15", fixed=False)
    _ranged(hour, 0, 23, "hour")
    rest = _literal(rest, ":")
    minute, rest = _number(rest, "04", fixed=True)
    _ranged(minute, 0, 59, "minute")
    rest = _literal(rest, ":")
    second, rest = _number(rest, "05", fixed=True)
    _ranged(second, 0, 59, "second")
    if micro:
        if len(rest) < 7 or rest[0] not in ".," or not all(c in _DIGITS for c in rest[1:7]):
            raise _cannot(rest, ".000000")
        rest = rest[7:]
    elif len(rest) >= 2 and rest[0] in ".," and rest[1] in _DIGITS:
        n = 2
        while n < len(rest) and rest[n] in _DIGITS:
            n += 1
        rest = rest[n:]
    rest = _zone(rest)
    if rest:
        raise _Failed(f": extra text: {_quote(rest)}")
    if not 1 <= day <= _days_in(month, year):
        raise _Failed(": day out of range")


def _zone(rest: str) -> str:
    """`Z`, or `±hh:mm` (Go allows an offset up to 24:60)."""
    if rest[:1] == "Z":
        return rest[1:]
    if len(rest) < 6 or rest[3] != ":" or not all(c in _DIGITS for c in rest[1:3] + rest[4:6]):
        raise _cannot(rest, "Z07:00")
    hours, minutes = int(rest[1:3]), int(rest[4:6])
    if minutes > 60:  # Go's range test is `>`: offsets of 24 hours or 60 minutes are written
        raise _Failed(": time zone offset minute out of range")
    if hours > 24:
        raise _Failed(": time zone offset hour out of range")
    if rest[0] not in "+-":
        raise _cannot(rest, "Z07:00")
    return rest[6:]
