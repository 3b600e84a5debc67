"""A Prometheus configuration that scrapes every component of a running `tessera up`.

`tessera up` picks free loopback ports, so its targets are read from `up.json` (state.py) rather
than found as in a cluster (deploy/monitoring/prometheus.yaml finds pods by annotation). Jobs are
named as the cluster configuration names them (the pods' app.kubernetes.io/name: tessera-scheduler,
tessera-agent, ...), so deploy/monitoring/rules.yaml and the Grafana dashboard work on both. The API
server is scraped over HTTPS with its CA and your token, as a cluster's kube-apiserver. The
dashboard serves no metrics and is not a target. Pure: state in, configuration out; the e2e tests
and `tessera up --prometheus` write it next to the data directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from cli.localcluster.state import UpState

__all__ = ["NOT_SCRAPED", "RULES", "job_of", "prometheus_config"]

#: deploy/monitoring/rules.yaml of this checkout.
RULES: Final = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "rules.yaml"
#: Components with no /metrics.
NOT_SCRAPED: Final = frozenset({"dashboard"})


def job_of(component: str) -> str:
    """`agent/sim-1` -> `tessera-agent`: the job a component's targets are in."""
    return f"tessera-{component.split('/', 1)[0]}"


def prometheus_config(
    up: UpState, *, ca_file: Path, token_file: Path, rules: Path = RULES, interval_s: float = 5.0
) -> dict[str, Any]:
    """Prometheus' configuration (a dict to dump as YAML) for the components `up` lists."""
    static: dict[str, list[dict[str, Any]]] = {}
    secure: list[str] = []
    for name, component in sorted(up.components.items()):
        if name in NOT_SCRAPED or not component.url:
            continue
        url = urlsplit(component.url)
        if url.scheme == "https":
            secure.append(url.netloc)
            continue
        labels: Mapping[str, str] = {"component": name, **({"node": component.node} if component.node else {})}
        static.setdefault(job_of(name), []).append({"targets": [url.netloc], "labels": dict(labels)})
    interval = f"{interval_s:g}s"
    jobs: list[dict[str, Any]] = [
        {"job_name": job, "static_configs": targets} for job, targets in sorted(static.items())
    ]
    if secure:
        jobs.append(
            {
                "job_name": "tessera-apiserver",
                "scheme": "https",
                "tls_config": {"ca_file": str(ca_file)},
                "authorization": {"credentials_file": str(token_file)},
                "static_configs": [{"targets": secure, "labels": {"component": "apiserver"}}],
            }
        )
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules)],
        "scrape_configs": jobs,
    }
