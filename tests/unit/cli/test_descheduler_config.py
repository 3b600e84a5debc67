"""`tessera descheduler --config FILE`: the arbitration settings from YAML, flags winning, and
a clear one-line error for what cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import descheduler as command
from cli import main


def settings(*argv: str) -> object:
    return command.settings_from(main.build_parser("descheduler").parse_args(["descheduler", *argv]))


def test_the_file_sets_and_the_flags_win(tmp_path: Path) -> None:
    config = tmp_path / "safety.yaml"
    config.write_text(
        "evictionQPS: 0.1\nmaxMigratingPerWorkload: 2\nexcludeNamespaces: [prod]\ndryRun: true\n", encoding="utf-8"
    )
    built = settings("--config", str(config), "--max-per-workload", "3")
    a = built.arbitration  # type: ignore[attr-defined]
    assert (a.eviction_qps, a.max_per_workload, a.exclude_namespaces, a.dry_run) == (0.1, 3, ("prod",), True)
    assert a.max_per_node == 2  # the default, untouched


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("maxPerNode: 1\n", "unknown keys maxPerNode"),
        ("evictionQPS: fast\n", "evictionQPS must be a number"),
        ("excludeNamespaces: prod\n", "excludeNamespaces must be a list"),
        ("- 1\n", "expected a mapping"),
    ],
)
def test_a_bad_file_is_one_line_and_exit_code_2(
    text: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text, encoding="utf-8")
    assert main.main(["descheduler", "--kubeconfig=/nonexistent", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tessera descheduler: --config") and problem in err
    assert len(err.splitlines()) == 1
