"""`cli.bench._report`: the one way every benchmark summarises and prints what it measured."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.bench._report import Latencies, Report, Timer


def test_latencies_are_inclusive_percentiles_in_ms() -> None:
    summary = Latencies.of([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert summary.count == 100
    assert summary.p50_ms == pytest.approx(50.5)
    assert summary.p90_ms == pytest.approx(90.1)
    assert summary.p99_ms == pytest.approx(99.01)
    assert summary.max_ms == pytest.approx(100)


def test_one_sample_is_every_percentile_and_none_is_an_error() -> None:
    assert Latencies.of([0.002]) == Latencies(1, 2.0, 2.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="no samples"):
        Latencies.of([])


def ticks(*values: float) -> Iterator[float]:
    yield from values


def test_timer_keeps_each_block_and_the_span() -> None:
    clock = ticks(10.0, 10.5, 11.0, 12.0)
    timer = Timer(lambda: next(clock))
    for _ in range(2):
        with timer.time():
            pass
    assert timer.samples == [0.5, 1.0]
    assert timer.elapsed_s == 2.0
    assert timer.summary().max_ms == 1000.0


def sample_report(output: str, stream: io.StringIO) -> Report:
    report = Report("demo", output="json" if output == "json" else "table", stream=stream)
    report.setting(pods=3)
    report.rate("pods_per_second", 3, 0.5, "pods", label="throughput", seconds=0.5)
    report.latencies(Latencies.of([0.001, 0.003]), label="cycle")
    report.latencies(Latencies.of([0.004]), "watch", label="watch delay")
    report.finish()
    return report


def test_json_is_one_flat_object_with_the_main_summary_at_the_top() -> None:
    out = io.StringIO()
    sample_report("json", out)
    doc = json.loads(out.getvalue())
    assert doc["benchmark"] == "demo" and doc["cpus"] >= 1 and doc["python"]
    assert (doc["pods"], doc["pods_per_second"], doc["seconds"]) == (3, 6.0, 0.5)
    assert (doc["samples"], doc["p50_ms"], doc["max_ms"]) == (2, 2.0, 3.0)
    assert doc["watch"] == {"samples": 1, "p50_ms": 4.0, "p90_ms": 4.0, "p99_ms": 4.0, "max_ms": 4.0}


def test_table_has_a_header_and_a_row_per_measurement() -> None:
    out = io.StringIO()
    sample_report("table", out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("# tessera bench demo: python") and lines[0].endswith("; pods=3")
    assert lines[1].split() == ["throughput", "6", "pods/s", "seconds=0.5"]
    assert lines[2].startswith("cycle ") and "p50 2 ms, p90 2.8 ms, p99 2.98 ms, max 3 ms (n=2)" in lines[2]
    assert lines[3].startswith("watch delay ")
    assert len(lines) == 4


def test_rows_are_the_legacy_list(tmp_path: Path) -> None:
    report = sample_report("table", io.StringIO())
    report.write_rows(tmp_path / "rows.json")
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["name"] for r in rows] == ["throughput", "cycle", "watch delay"]
    assert rows[0] == {"name": "throughput", "value": 6.0, "unit": "pods/s", "seconds": 0.5}
    assert rows[2]["value"] == rows[2]["p50_ms"] == 4.0 and rows[2]["unit"] == "ms"


def test_a_key_reported_twice_is_an_error() -> None:
    report = Report("demo", stream=io.StringIO())
    report.value("rss_mib", 1.0, "MiB", label="memory")
    with pytest.raises(ValueError, match="'rss_mib' reported twice"):
        report.value("rss_mib", 2.0, "MiB", label="memory again")
    report.latencies(Latencies.of([0.001]), label="main")
    with pytest.raises(ValueError, match="'samples' reported twice"):
        report.latencies(Latencies.of([0.001]), label="a second main timing")


def test_notes_go_to_stderr_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    report = Report("demo", output="json", stream=out)
    report.note("working")
    assert out.getvalue() == "" and capsys.readouterr().err == "# working\n"


def test_a_listing_is_a_json_array_and_an_indented_line_per_record_in_the_table() -> None:
    records = [{"invariant": "object-lost", "objects": "soak/a"}, {"invariant": "device-given-twice", "objects": "x"}]
    as_json = io.StringIO()
    report = Report("soak", output="json", stream=as_json)
    report.listing("violation_list", records, label="violations")
    report.finish()
    assert json.loads(as_json.getvalue())["violation_list"] == records
    table = io.StringIO()
    Report("soak", stream=table).listing("violation_list", records, label="violations")
    lines = table.getvalue().splitlines()
    assert lines[1].split() == ["violations", "2"]
    assert lines[2:] == ["  - invariant=object-lost, objects=soak/a", "  - invariant=device-given-twice, objects=x"]
