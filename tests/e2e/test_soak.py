"""`tessera bench soak`, short: the whole system under load while components are killed, and no
invariant breaks. The soak itself checks the invariants (cli/bench/soak/invariants); this test
checks that it ran what it says — pods scheduled, kills survived, faults injected, nodes lost
and back, Jobs completed, Deployments rolled out, Reservations and PodMigrationJobs created — and
its report.

Bounds are generous for a loaded 2-core CI machine: the soak's own (pending within 30 s of the
last kill) come from its settings, and the process gets its duration plus start-up, settling
and stopping.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.up import tessera_command

pytestmark = pytest.mark.e2e

DURATION_S = 60
#: Start-up (under 10 s), the settle phase (at most `SoakSettings.settle_s`, about 100 s) and
#: stopping, on top of the duration, with room for a slow machine.
TIMEOUT_S = DURATION_S + 300


def test_a_short_soak_schedules_pods_survives_kills_and_breaks_no_invariant() -> None:
    args = ["bench", "soak", "--duration", f"{DURATION_S}s", "--nodes", "3", "--kill-interval", "8s"]
    args += ["--node-loss-interval", "20s", "-o", "json"]
    run = subprocess.run([*tessera_command(), *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert run.returncode == 0, f"the soak failed:\n{run.stdout}\n{run.stderr[-4000:]}"
    report = json.loads(run.stdout)
    assert report["benchmark"] == "soak"
    assert report["violations"] == 0
    assert report["violation_list"] == []
    assert report["kills"] >= 3
    assert report["kills_survived"] == report["kills"]
    assert report["pods_scheduled"] >= 20
    assert report["faults_injected"] >= 1
    assert report["checks"] >= 10
    assert report["node_losses"] >= 1
    assert report["nodes_back"] == report["node_losses"]
    assert report["jobs_completed"] >= 3  # a Job every 8 s, each 3 s long
    assert report["rollouts"] >= 1
    # A Reservation every 8 s on average (at most 3 live), a PodMigrationJob every 12 s.
    assert report["reservations"] >= 2
    assert report["migrations"] >= 1
    # Whether the lost node was judged lost (and its pods evicted) within its 30 s depends on the
    # API server kills meanwhile (each gives every node a whole grace again): counted, not required.
    assert report["nodes_seen_tainted"] <= report["node_losses"] + report["kills"]
    for key in ("samples", "p50_ms", "p99_ms", "max_ms", "pods_created", "pods_deleted", "seconds", "pods_evicted"):
        assert key in report
