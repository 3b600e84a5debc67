"""A Prometheus configuration that scrapes every component of a running `tessera up`.

`tessera up` picks free loopback ports, so its targets are read from `up.json` (state.py) rather
than found as in a cluster (deploy/monitoring/prometheus.yaml finds pods by annotation). Jobs are
named as the cluster configuration names them (the pods' app.kubernetes.io/name: tessera-scheduler,
tessera-agent, ...), so deploy/monitoring/rules.yaml and the Grafana dashboard work on both. The
components answer `/metrics` only to a token the API server allows `get` on it (docs/security.md):
they are scraped with `DATA_DIR/metrics-token` (tessera-metrics-reader, nothing more). The API
server is scraped over HTTPS with its CA and your token, as a cluster's kube-apiserver. The
dashboard serves no metrics and is not a target, nor is Prometheus itself.

Targets are written into the configuration (static) or, for `tessera up --prometheus`, into one
file per job that Prometheus watches (`file_sd`): a component that restarts serves on a new
port, and `write_targets` rewrites the files from the state file each time it changes. A job's
scrape settings are made in one place (`_job`): the API server's token for it, the metrics token
for the others. Pure but for `write_targets`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from cli.localcluster.state import UpState
from kube.lifecycle import write_atomically

__all__ = ["APISERVER_JOB", "NOT_SCRAPED", "RULES", "job_of", "prometheus_config", "target_groups", "write_targets"]

#: deploy/monitoring/rules.yaml of this checkout.
RULES: Final = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "rules.yaml"
#: Components with no /metrics.
NOT_SCRAPED: Final = frozenset({"dashboard", "prometheus"})
#: The API server's job: scraped over HTTPS with a token, as a cluster's kube-apiserver.
APISERVER_JOB: Final = "tessera-apiserver"


def job_of(component: str) -> str:
    """`agent/sim-1` -> `tessera-agent`: the job a component's targets are in."""
    return f"tessera-{component.split('/', 1)[0]}"


def target_groups(up: UpState) -> dict[str, list[dict[str, Any]]]:
    """Each job's targets, as file_sd lists them: `[{"targets": ["HOST:PORT"], "labels": {...}}]`,
    labelled with the component (and its node)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for name, component in sorted(up.components.items()):
        if name in NOT_SCRAPED or not component.url:
            continue
        labels = {"component": name, **({"node": component.node} if component.node else {})}
        groups.setdefault(job_of(name), []).append({"targets": [urlsplit(component.url).netloc], "labels": labels})
    return groups


def _job(
    job: str,
    groups: list[dict[str, Any]],
    *,
    ca_file: Path,
    token_file: Path,
    metrics_token_file: Path,
    targets_dir: Path | None,
    interval: str,
) -> dict[str, Any]:
    """One scrape job: its targets (static, or the file `write_targets` keeps) and how to reach them."""
    out: dict[str, Any] = {"job_name": job}
    if job == APISERVER_JOB:
        out |= {
            "scheme": "https",
            "tls_config": {"ca_file": str(ca_file)},
            "authorization": {"credentials_file": str(token_file)},
        }
    else:  # a component authorizes `get /metrics` through the API server (docs/security.md)
        out["authorization"] = {"credentials_file": str(metrics_token_file)}
    if targets_dir is None:
        out["static_configs"] = groups
    else:
        out["file_sd_configs"] = [{"files": [str(targets_dir / f"{job}.json")], "refresh_interval": interval}]
    return out


def prometheus_config(
    up: UpState,
    *,
    ca_file: Path,
    token_file: Path,
    metrics_token_file: Path | None = None,
    rules: Path = RULES,
    interval_s: float = 5.0,
    targets_dir: Path | None = None,
) -> dict[str, Any]:
    """Prometheus' configuration (a dict to dump as YAML) for the components `up` lists; with
    `targets_dir`, their targets are read from the files there (`write_targets`).
    `metrics_token_file`: the components' scrape token (default `DATA_DIR/metrics-token`)."""
    interval = f"{interval_s:g}s"
    metrics_token = metrics_token_file or Path(up.data_dir) / "metrics-token"
    jobs = [
        _job(
            job,
            groups,
            ca_file=ca_file,
            token_file=token_file,
            metrics_token_file=metrics_token,
            targets_dir=targets_dir,
            interval=interval,
        )
        for job, groups in sorted(target_groups(up).items())
    ]
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules)],
        "scrape_configs": jobs,
    }


def write_targets(up: UpState, targets_dir: Path, jobs: Iterable[str]) -> None:
    """Write each of `jobs`' targets file from `up` (an empty list for a job with none now), each
    file whole or not at all (Prometheus may read it at any moment)."""
    groups = target_groups(up)
    for job in jobs:
        write_atomically(targets_dir / f"{job}.json", json.dumps(groups.get(job, []), indent=1) + "\n")
