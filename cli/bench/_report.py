"""How every `tessera bench` target times, summarises and prints what it measured.

One place for it so that the targets report alike: a `Timer` collects durations, `Latencies`
summarises them (count, p50, p90, p99, max, in milliseconds), and a `Report` holds a run's
settings and measurements in the order they were taken and shows them as a table (`-o table`,
each row printed as it is measured, so a long run shows its progress) or as one flat JSON object
on stdout (`-o json`).

The JSON object has `benchmark`, `python` and `cpus`, then every setting and measurement under
its own key, with the unit in the key (`rss_mib`, `pods_per_second`). A latency summary is an
object `{"samples", "p50_ms", "p90_ms", "p99_ms", "max_ms"}` under its key, except the one the
target names its main timing, whose fields stand at the top level. Details of a measurement
(shown beside it in the table) are keys of their own too, so keys are unique within a report.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

__all__ = ["OUTPUTS", "Latencies", "Output", "Report", "Scalar", "Timer"]

Output = Literal["table", "json"]
OUTPUTS: tuple[Output, ...] = ("table", "json")
Scalar = int | float | str | bool | None
JSONValue = Scalar | dict[str, Scalar] | list[dict[str, Scalar]]

_LABEL_WIDTH = 48


@dataclass(frozen=True, slots=True)
class Latencies:
    """Percentiles of one series of durations, in milliseconds."""

    count: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, samples_s: Sequence[float]) -> Latencies:
        """Summarise durations given in seconds. One sample is its own every percentile; none is a
        ValueError (a benchmark that timed nothing has nothing to report)."""
        if not samples_s:
            raise ValueError("no samples to summarise")
        if len(samples_s) == 1:
            only = samples_s[0] * 1e3
            return cls(1, only, only, only, only)
        cuts = statistics.quantiles(samples_s, n=100, method="inclusive")
        return cls(len(samples_s), cuts[49] * 1e3, cuts[89] * 1e3, cuts[98] * 1e3, max(samples_s) * 1e3)

    def to_dict(self) -> dict[str, Scalar]:
        return {
            "samples": self.count,
            "p50_ms": round(self.p50_ms, 3),
            "p90_ms": round(self.p90_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "max_ms": round(self.max_ms, 3),
        }

    def row(self) -> str:
        return (
            f"p50 {_number(self.p50_ms)} ms, p90 {_number(self.p90_ms)} ms, p99 {_number(self.p99_ms)} ms, "
            f"max {_number(self.max_ms)} ms (n={self.count})"
        )


class Timer:
    """Collects how long each timed block took (by `clock`: wall time by default, or
    `time.process_time` for CPU time) and the span from the first start to the last end.

    `with timer.time(): ...` may be used by concurrent asyncio tasks: each block keeps its own start.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.samples: list[float] = []
        self._first: float | None = None
        self._last: float | None = None

    @contextlib.contextmanager
    def time(self) -> Iterator[None]:
        start = self._clock()
        if self._first is None:
            self._first = start
        yield
        self._last = self._clock()
        self.samples.append(self._last - start)

    @property
    def elapsed_s(self) -> float:
        """Seconds from the first block's start to the last block's end (0 before any)."""
        return 0.0 if self._first is None or self._last is None else self._last - self._first

    def summary(self) -> Latencies:
        return Latencies.of(self.samples)


@dataclass(slots=True)
class _Row:
    label: str
    text: str
    legacy: dict[str, Scalar]


@dataclass(slots=True)
class Report:
    """One run of one benchmark: its settings and measurements, shown as a table or JSON.

    Table rows are printed to `stream` as they are added; the JSON object only by `finish()`.
    Adding a key twice is a ValueError: it would hide a number.
    """

    benchmark: str
    output: Output = "table"
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    _doc: dict[str, JSONValue] = field(init=False)
    _settings: list[str] = field(init=False, default_factory=list)
    _rows: list[_Row] = field(init=False, default_factory=list)
    _header_printed: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self._doc = {"benchmark": self.benchmark, "python": platform.python_version(), "cpus": os.cpu_count()}

    def setting(self, **settings: Scalar) -> None:
        """What the run was asked to do (sizes, seeds, profiles): JSON keys and the table's header."""
        for key, value in settings.items():
            self._put(key, value)
            self._settings.append(f"{key}={value}")

    def value(self, key: str, value: Scalar, unit: str = "", /, *, label: str, **detail: Scalar) -> None:
        """One measured number (or fact); `detail` are further numbers shown on its row."""
        self._put(key, value)
        for name, extra in detail.items():
            self._put(name, extra)
        shown = _with_detail(f"{_number(value):>12} {unit:<10}", detail)
        self._row(_Row(label, shown, {"name": label, "value": _rounded(value), "unit": unit, **_all_rounded(detail)}))

    def rate(self, key: str, count: float, seconds: float, unit: str, /, *, label: str, **detail: Scalar) -> float:
        """Throughput: `count` things in `seconds` (0 when no time passed), as `unit`/s."""
        per_second = round(count / seconds, 1) if seconds > 0 else 0.0
        self.value(key, per_second, f"{unit}/s", label=label, **detail)
        return per_second

    def latencies(self, summary: Latencies, key: str | None = None, /, *, label: str, **detail: Scalar) -> None:
        """A latency summary under `key`, or at the top level for the benchmark's main timing."""
        fields = summary.to_dict()
        if key is None:
            for name, value in fields.items():
                self._put(name, value)
        else:
            self._put(key, fields)
        for name, extra in detail.items():
            self._put(name, extra)
        legacy = {"name": label, "value": fields["p50_ms"], "unit": "ms", **fields, **_all_rounded(detail)}
        self._row(_Row(label, _with_detail(summary.row(), detail), legacy))

    def listing(self, key: str, items: Sequence[Mapping[str, Scalar]], /, *, label: str) -> None:
        """A list of records (a soak's violations): a JSON array under `key`; in the table a row
        with their count, then one indented line per record."""
        records = [dict(item) for item in items]
        self._put(key, records)
        self._row(_Row(label, f"{len(records):>12}", {"name": label, "value": len(records), "unit": ""}))
        if self.output == "table":
            for record in records:
                print(f"  {_with_detail('-', record)}", file=self.stream, flush=True)

    def note(self, line: str) -> None:
        """Progress or a remark, not a result: a `# line` in the table, stderr with JSON."""
        if self.output == "json":
            print(f"# {line}", file=sys.stderr, flush=True)
        else:
            self._header()
            print(f"# {line}", file=self.stream, flush=True)

    def rows(self) -> list[dict[str, Scalar]]:
        """The measurements as a list of `{"name", "value", "unit", ...details}`, one per table row."""
        return [dict(row.legacy) for row in self._rows]

    def write_rows(self, path: Path) -> None:
        """Write `rows()` as JSON: what `--json FILE` of `tessera bench apiserver` and `controller`
        has always written (a list, where `-o json` prints one object)."""
        path.write_text(json.dumps(self.rows(), indent=2), encoding="utf-8")

    def finish(self) -> None:
        """Print the JSON object (`-o json`); the table is already out."""
        if self.output == "json":
            print(json.dumps(self._doc, indent=2), file=self.stream, flush=True)
        else:
            self._header()

    def _put(self, key: str, value: JSONValue) -> None:
        if key in self._doc:
            raise ValueError(f"benchmark {self.benchmark}: {key!r} reported twice")
        self._doc[key] = value if isinstance(value, dict | list) else _rounded(value)

    def _row(self, row: _Row) -> None:
        self._rows.append(row)
        if self.output == "table":
            self._header()
            print(f"{row.label:<{_LABEL_WIDTH}} {row.text}".rstrip(), file=self.stream, flush=True)

    def _header(self) -> None:
        if self._header_printed:
            return
        self._header_printed = True
        settings = f"; {', '.join(self._settings)}" if self._settings else ""
        print(
            f"# tessera bench {self.benchmark}: python {self._doc['python']}, {self._doc['cpus']} CPUs{settings}",
            file=self.stream,
            flush=True,
        )


def _rounded(value: Scalar) -> Scalar:
    return round(value, 3) if isinstance(value, float) else value


def _all_rounded(values: dict[str, Scalar]) -> dict[str, Scalar]:
    return {name: _rounded(value) for name, value in values.items()}


def _number(value: Scalar) -> str:
    """Readable in a table: thousands grouped, about four significant digits, no trailing zeros."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    if isinstance(value, int) or abs(value) >= 1000:
        return f"{value:,.0f}"
    decimals = 1 if abs(value) >= 100 else 2 if abs(value) >= 10 else 3
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def _with_detail(shown: str, detail: dict[str, Scalar]) -> str:
    if not detail:
        return shown
    return f"{shown} {', '.join(f'{name}={_number(value)}' for name, value in detail.items())}"
