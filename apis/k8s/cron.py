"""A CronJob's `spec.schedule`: parsed and stepped as kube-controller-manager does.

Kubernetes reads schedules with robfig/cron's standard parser (v3 `ParseStandard`), so that is
the grammar here, error messages included (kube-apiserver returns them as the field's problem):

- five fields, `minute hour day-of-month month day-of-week`, each a comma list of `*` or `?`,
  `N`, `N-M`, with an optional `/STEP` (`N/STEP` means N to the field's maximum); months and
  weekdays also by their three-letter English names (`JAN`, `sun`); weekdays 0-6, Sunday 0;
- day of month and day of week: when either field starts with `*` or `?` (and has no step above
  1) a day must match both, else either (Vixie cron's rule);
- the descriptors `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`),
  `@hourly`, and `@every DURATION` (a Go duration, whole seconds, at least 1 s);
- an optional `CRON_TZ=ZONE ` or `TZ=ZONE ` prefix; the API server refuses it in new CronJobs
  (spec.timeZone says it), the controller writes it itself from spec.timeZone.

`Schedule.next_after(t)` is robfig's `Next`: the first time strictly after `t`, to the second.
Times are wall-clock times in the schedule's zone; across a daylight-saving change a wall time
that does not exist (02:30 when clocks jump from 02:00 to 03:00) is skipped, and one that happens
twice (01:30 when clocks go back) fires both times, as robfig's does. A schedule that matches no
time in the next five years (`0 0 30 2 *`) has no next time (None), which kube reports as an
invalid schedule. Pure: the zones come from the caller (`zone(name)` loads one).
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from apis.errors import TesseraError
from apis.k8s.duration import parse_duration

__all__ = ["Schedule", "ScheduleError", "UnknownZoneError", "zone"]

_DESCRIPTORS: Final[Mapping[str, str]] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS: Final = {
    m: i + 1 for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
}
_WEEKDAYS: Final = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
#: (minimum, maximum, names) of minute, hour, day of month, month, day of week.
_BOUNDS: Final[tuple[tuple[int, int, Mapping[str, int]], ...]] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _WEEKDAYS),
)
#: How far ahead a schedule is searched (robfig gives up after five years).
_YEARS_AHEAD: Final = 5
#: More than any daylight-saving shift: how far wall-clock order and time order can disagree.
_MAX_SHIFT: Final = datetime.timedelta(hours=3)
_ZONE_PART: Final = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


class ScheduleError(TesseraError, ValueError):
    """A schedule robfig's parser refuses; the message is the one kube-apiserver gives for it."""


class UnknownZoneError(ScheduleError):
    """A time zone name that is not one of the IANA database's."""


def zone(name: str) -> datetime.tzinfo:
    """The IANA time zone `name` (`Europe/Berlin`, `UTC`); UnknownZoneError naming it otherwise.

    Names are checked as kube-apiserver checks spec.timeZone: IANA's rules for names (parts of
    letters, digits, `.`, `-`, `_`, `+`, at most 14 each), and `Local` is refused.
    """
    parts = name.split("/")
    if not name or any(p in (".", "..") or p.startswith("-") or not _ZONE_PART.fullmatch(p) for p in parts):
        raise UnknownZoneError(f"unknown time zone {name}")
    if name.lower() == "local":
        raise UnknownZoneError("timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as e:
        raise UnknownZoneError(f"unknown time zone {name}") from e


def _number(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ScheduleError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if value < 0:
        raise ScheduleError(f"negative number ({value}) not allowed: {text}")
    return value


def _value(text: str, names: Mapping[str, int]) -> int:
    return names[text.lower()] if text.lower() in names else _number(text)


def _range(expr: str, low: int, high: int, names: Mapping[str, int]) -> tuple[frozenset[int], bool]:
    """The values of one comma-separated part, and whether it is a star (`*`, `?`, `*/1`)."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _value(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _value(low_and_high[1], names)
        else:
            raise ScheduleError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1])
        if len(low_and_high) == 1:  # `N/STEP`: N to the maximum
            end = high
        star = star and step <= 1
    else:
        raise ScheduleError(f"too many slashes: {expr}")
    if start < low:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ScheduleError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ScheduleError(f"step of range should be a positive number: {expr}")
    return frozenset(range(start, end + 1, step)), star


def _field(text: str, bounds: tuple[int, int, Mapping[str, int]]) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for part in (p for p in text.split(",") if p):
        found, part_star = _range(part, *bounds)
        values |= found
        star = star or part_star
    return frozenset(values), star


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule: the values each field allows, or a fixed period (`@every`)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    #: Day of month or day of week started with a star: a day must match both (else either).
    both_days: bool
    tz: datetime.tzinfo
    #: `@every`: seconds between runs (the fields are then unused).
    every_s: int = 0

    @classmethod
    def parse(cls, spec: str, *, tz: datetime.tzinfo) -> Schedule:
        """Parse `spec` (robfig's standard grammar) with `tz` as the zone unless it names one.

        Raises ScheduleError with robfig's message (UnknownZoneError for a bad `CRON_TZ=`)."""
        if not spec:
            raise ScheduleError("empty spec string")
        if spec.startswith(("TZ=", "CRON_TZ=")):
            space = spec.find(" ")
            name = spec[spec.index("=") + 1 : space if space >= 0 else len(spec)]
            try:
                tz = zone(name)
            except UnknownZoneError as e:
                raise UnknownZoneError(f"provided bad location {name}: {e}") from e
            spec = spec[space:].strip() if space >= 0 else ""
        if spec.startswith("@"):
            if spec.startswith("@every "):
                return cls._every(spec, tz)
            if spec not in _DESCRIPTORS:
                raise ScheduleError(f"unrecognized descriptor: {spec}")
            spec = _DESCRIPTORS[spec]
        fields = spec.split()
        if len(fields) != 5:
            raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
        (minutes, _), (hours, _), (days, day_star), (months, _), (weekdays, weekday_star) = (
            _field(text, bounds) for text, bounds in zip(fields, _BOUNDS, strict=True)
        )
        return cls(minutes, hours, days, months, weekdays, day_star or weekday_star, tz)

    @classmethod
    def _every(cls, spec: str, tz: datetime.tzinfo) -> Schedule:
        text = spec.removeprefix("@every ")
        try:
            seconds = parse_duration(text.lstrip("+-")) * (-1 if text.startswith("-") else 1)
        except ValueError as e:
            raise ScheduleError(f'failed to parse duration {spec}: time: invalid duration "{text}"') from e
        none: frozenset[int] = frozenset()
        return cls(none, none, none, none, none, False, tz, every_s=max(1, int(seconds)))

    # --- stepping ----------------------------------------------------------------------------------
    def next_after(self, t: datetime.datetime) -> datetime.datetime | None:
        """The first time the schedule fires strictly after `t` (aware), in `t`'s zone; None when
        there is none within five years."""
        if self.every_s:
            return t.replace(microsecond=0) + datetime.timedelta(seconds=self.every_s)
        wall = t.astimezone(self.tz).replace(tzinfo=None)
        best: datetime.datetime | None = None
        first_wall: datetime.datetime | None = None
        # Wall-clock order is time order but for the hour clocks go back: look from a little
        # earlier, and on a little past the first match, for the earliest time after t.
        after = t.timestamp()  # compared as timestamps: aware datetimes of one zone compare wall times
        for candidate in self._walls(wall.replace(second=0, microsecond=0) - _MAX_SHIFT, wall.year + _YEARS_AHEAD):
            if first_wall is not None and candidate > first_wall + _MAX_SHIFT:
                break
            for instant in self._instants(candidate):
                if instant.timestamp() > after and (best is None or instant.timestamp() < best.timestamp()):
                    best, first_wall = instant, first_wall or candidate
        return None if best is None else best.astimezone(t.tzinfo)

    def _day_matches(self, day: datetime.datetime) -> bool:
        in_month, in_week = day.day in self.days, (day.weekday() + 1) % 7 in self.weekdays
        return (in_month and in_week) if self.both_days else (in_month or in_week)

    def _walls(self, start: datetime.datetime, last_year: int) -> Iterator[datetime.datetime]:
        """The wall-clock minutes the fields match, from `start` on, in order, until `last_year`."""
        t = start
        while t.year <= last_year:
            if t.month not in self.months:
                t = datetime.datetime(t.year + t.month // 12, t.month % 12 + 1, 1)
            elif not self._day_matches(t):
                t = datetime.datetime(t.year, t.month, t.day) + datetime.timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + datetime.timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += datetime.timedelta(minutes=1)
            else:
                yield t
                t += datetime.timedelta(minutes=1)

    def _instants(self, wall: datetime.datetime) -> list[datetime.datetime]:
        """The times a wall-clock time names in the zone: none (skipped by a jump ahead), one, or
        two (the hour clocks go back)."""
        earlier, later = wall.replace(tzinfo=self.tz, fold=0), wall.replace(tzinfo=self.tz, fold=1)
        if earlier.astimezone(datetime.UTC).astimezone(self.tz).replace(tzinfo=None) != wall:
            return []
        return [earlier] if earlier.utcoffset() == later.utcoffset() else [earlier, later]
