"""CronJob schedules as Kubernetes reads them (robfig/cron's standard parser): the next time, daylight
saving, and the messages kube-apiserver returns for schedules it refuses."""

from __future__ import annotations

import datetime

import pytest

from apis.k8s.cron import Schedule, ScheduleError, UnknownZoneError, zone

UTC = datetime.UTC
NEW_YORK = zone("America/New_York")


def at(text: str, tz: datetime.tzinfo = UTC) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=tz)


def following(spec: str, start: datetime.datetime, count: int, tz: datetime.tzinfo = UTC) -> list[str]:
    schedule = Schedule.parse(spec, tz=tz)
    out, t = [], start
    for _ in range(count):
        nxt = schedule.next_after(t)
        assert nxt is not None
        out.append(nxt.astimezone(tz).isoformat())
        t = nxt
    return out


@pytest.mark.parametrize(
    ("spec", "start", "expected"),
    [
        ("*/15 * * * *", "2024-01-01T10:07:30", ["10:15", "10:30", "10:45", "11:00"]),
        ("5/20 * * * *", "2024-01-01T10:00:00", ["10:05", "10:25", "10:45", "11:05"]),
        ("0 9-17/4 * * *", "2024-01-01T08:00:00", ["09:00", "13:00", "17:00", "09:00"]),
        ("@hourly", "2024-01-01T10:00:00", ["11:00", "12:00", "13:00", "14:00"]),
        ("0 * * * *", "2024-01-01T10:00:00", ["11:00", "12:00", "13:00", "14:00"]),
        ("59 23 * * *", "2024-01-01T23:59:00", ["23:59", "23:59", "23:59", "23:59"]),
    ],
    ids=["every-15", "5-past-by-20", "hour-range-step", "hourly", "top-of-hour-strictly-after", "just-fired"],
)
def test_times_within_a_day(spec: str, start: str, expected: list[str]) -> None:
    times = following(spec, at(start), 4)
    assert [t[11:16] for t in times] == expected


def test_descriptors_are_their_five_field_equivalents() -> None:
    start = at("2024-02-14T12:34:56")
    for descriptor, fields in [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
    ]:
        assert following(descriptor, start, 3) == following(fields, start, 3), descriptor
    assert following("@weekly", start, 1) == ["2024-02-18T00:00:00+00:00"]  # a Sunday
    assert following("@yearly", start, 1) == ["2025-01-01T00:00:00+00:00"]


def test_day_of_month_or_week_either_unless_one_is_a_star() -> None:
    # Both restricted: the 1st, the 15th, and every Wednesday (Vixie cron's OR).
    days = [t[:10] for t in following("0 0 1,15 * WED", at("2024-05-01T00:00:00"), 5)]
    assert days == ["2024-05-08", "2024-05-15", "2024-05-22", "2024-05-29", "2024-06-01"]
    # A star in one of them: both must match (every day of the month that is a Wednesday).
    assert [t[:10] for t in following("0 0 * * 3", at("2024-05-01T00:00:00"), 2)] == ["2024-05-08", "2024-05-15"]
    # A star with a step is no star: OR again (odd days, and Sundays).
    days = [t[:10] for t in following("0 0 */2 * SUN", at("2024-06-01T00:00:00"), 3)]
    assert days == ["2024-06-02", "2024-06-03", "2024-06-05"]


def test_names_of_months_and_weekdays_any_case() -> None:
    assert following("0 0 1 jan,JUL *", at("2024-02-01T00:00:00"), 2) == [
        "2024-07-01T00:00:00+00:00",
        "2025-01-01T00:00:00+00:00",
    ]
    assert following("0 12 * * Mon-Fri", at("2024-06-07T13:00:00"), 1) == ["2024-06-10T12:00:00+00:00"]


def test_a_time_zone_and_the_cron_tz_prefix() -> None:
    tokyo = zone("Asia/Tokyo")
    start = at("2023-12-31T23:00:00")  # 08:00 in Tokyo
    assert following("0 9 * * *", start, 1, tokyo) == ["2024-01-01T09:00:00+09:00"]
    schedule = Schedule.parse("CRON_TZ=Asia/Tokyo 0 9 * * *", tz=UTC)
    first = schedule.next_after(start)
    assert first == at("2024-01-01T00:00:00") and first is not None and first.tzinfo is UTC  # the caller's zone


def test_a_wall_time_clocks_skip_is_skipped_and_one_they_repeat_fires_twice() -> None:
    # 2024-03-10: New York's clocks jump from 02:00 to 03:00; 2024-11-03: back from 02:00 to 01:00.
    assert following("30 2 * * *", at("2024-03-09T12:00:00", NEW_YORK), 2, NEW_YORK) == [
        "2024-03-11T02:30:00-04:00",
        "2024-03-12T02:30:00-04:00",
    ]
    assert following("30 1 * * *", at("2024-11-03T00:00:00", NEW_YORK), 3, NEW_YORK) == [
        "2024-11-03T01:30:00-04:00",
        "2024-11-03T01:30:00-05:00",
        "2024-11-04T01:30:00-05:00",
    ]
    # Every 20 minutes through the repeated hour: each of its times twice, none lost.
    walls = [t[11:] for t in following("*/20 * * * *", at("2024-11-03T05:30:00"), 6, NEW_YORK)]
    assert walls == [
        "01:40:00-04:00",
        "01:00:00-05:00",
        "01:20:00-05:00",
        "01:40:00-05:00",
        "02:00:00-05:00",
        "02:20:00-05:00",
    ]


def test_every_duration_counts_from_the_last_whole_second() -> None:
    start = at("2024-01-01T00:00:00.750000")
    assert following("@every 90s", start, 2) == ["2024-01-01T00:01:30+00:00", "2024-01-01T00:03:00+00:00"]
    assert following("@every 1h30m", start, 1) == ["2024-01-01T01:30:00+00:00"]
    assert following("@every 200ms", start, 1) == ["2024-01-01T00:00:01+00:00"]  # at least a second


def test_a_schedule_naming_a_day_that_never_comes_has_no_next_time() -> None:
    assert Schedule.parse("0 0 30 2 *", tz=UTC).next_after(at("2024-01-01T00:00:00")) is None
    leap = Schedule.parse("0 0 29 2 *", tz=UTC).next_after(at("2024-03-01T00:00:00"))
    assert leap == at("2028-02-29T00:00:00")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 * * * *", "expected exactly 5 fields, found 6: [0 0 * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("* * * foo *", 'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax'),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every soon", 'failed to parse duration @every soon: time: invalid duration "soon"'),
        ("CRON_TZ=Mars/Olympus * * * * *", "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 32 else None,
)
def test_refused_schedules_say_what_kube_says(spec: str, message: str) -> None:
    with pytest.raises(ScheduleError) as e:
        Schedule.parse(spec, tz=UTC)
    assert str(e.value) == message


def test_time_zone_names_as_kube_apiserver_checks_them() -> None:
    assert zone("Europe/Berlin").utcoffset(datetime.datetime(2024, 1, 1)) == datetime.timedelta(hours=1)
    assert zone("Etc/GMT+5").utcoffset(datetime.datetime(2024, 1, 1)) == datetime.timedelta(hours=-5)
    for bad, message in [
        ("Mars/Olympus", "unknown time zone Mars/Olympus"),
        ("../etc/passwd", "unknown time zone ../etc/passwd"),
        ("Europe/-Berlin", "unknown time zone Europe/-Berlin"),
        ("Local", "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"),
        ("", "unknown time zone "),
    ]:
        with pytest.raises(UnknownZoneError) as e:
            zone(bad)
        assert str(e.value) == message
