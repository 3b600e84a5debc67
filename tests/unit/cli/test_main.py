"""The `tessera` entry point: flags that cannot work end in one line and exit code 2, for every
command that serves, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["apiserver", "--listen", "bad"], "tessera apiserver: --listen 'bad': expected HOST:PORT"),
        (["runtime-proxy", "--hook-timeout", "-1"], "tessera runtime-proxy: runtime proxy settings: hook_timeout_s"),
        (
            ["kube-controller-manager", "--listen", "x"],
            "tessera kube-controller-manager: --listen 'x': expected HOST:PORT",
        ),
        (
            ["kube-controller-manager", "--job-backoff", "-1"],
            "tessera kube-controller-manager: --job-backoff -1.0: must be >= 0 seconds",
        ),
    ],
    ids=["apiserver", "runtime-proxy", "kube-controller-manager-listen", "kube-controller-manager-backoff"],
)
def test_bad_flags_are_one_line_and_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_up_prometheus_without_prometheus_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no prometheus there
    assert main(["up", "--prometheus", "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "tessera up: --prometheus: no prometheus program on PATH; install Debian's (apt-get install "
        "prometheus) or put upstream's on PATH\n"
    )
    assert not (tmp_path / "data" / "up.json").exists(), "nothing may start"
