"""The dashboard in a real headless Chromium against `tessera up --demo`, as a person sees it.

The map shows the demo's pods on the GPUs their `device-allocated` annotations name; a GPU
failing through the agent's fault-injection endpoint turns red without a reload; a pending pod's
reason appears with the scheduler's chain; a Reservation the scheduler places shows as reserved
on the map, with an owner placed onto it marked, and the Reservations & migrations page lists it
with PodMigrationJobs (one the descheduler fails, one that does not parse). Every page is
captured as a PNG: into the test's temporary directory, or into `$TESSERA_SCREENSHOTS` (`make screenshots` points it at
docs/images). Skips, saying why, where there is no Chromium (`make test` installs Debian's as
root).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from cli.localcluster.demo import NAMESPACE
from tests.support.browser import BrowserUnavailable, Chromium, Page, chromium_binary
from tests.support.gpuobjects import migration_manifest, reservation_manifest
from tests.support.up import START_TIMEOUT_S, Up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

PAGES = ("map", "pending", "gangs", "reservations", "scheduler")
_PNG = b"\x89PNG\r\n\x1a\n"
_QUOTAS = (
    ("org", {names.GPU_CORE: "1600", names.CPU: "64"}, {names.GPU_CORE: "1600", names.CPU: "64"}, ""),
    ("training", {names.GPU_CORE: "800", names.CPU: "32"}, {names.GPU_CORE: "1600", names.CPU: "64"}, "org"),
    ("inference", {names.GPU_CORE: "400", names.CPU: "16"}, {names.GPU_CORE: "800", names.CPU: "32"}, "org"),
)


@pytest.fixture(scope="module")
def demo(workdir: Path) -> Iterator[Up]:
    if chromium_binary() is None:
        pytest.skip("no chromium on PATH: the dashboard's browser tests need it (as root, make test installs it)")
    with Up.started(workdir / "data", "--demo", "--nodes", "2", "--no-local-agent") as running:
        # Ready comes before the demo's pods: they are submitted, then placed, then the table printed.
        wait_for(lambda: "(placed in" in running.output(), timeout_s=START_TIMEOUT_S, what="the demo placed")
        with running.cluster() as cluster:
            for name, min_, max_, parent in _QUOTAS:
                labels = {names.LABEL_QUOTA_PARENT: parent} if parent else {names.LABEL_QUOTA_IS_PARENT: "true"}
                body = {
                    "apiVersion": names.ELASTIC_QUOTAS.api_version,
                    "kind": names.ELASTIC_QUOTAS.kind,
                    "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
                    "spec": {"min": min_, "max": max_},
                }
                group, version, plural = names.ELASTIC_QUOTAS.group, names.ELASTIC_QUOTAS.version, "elasticquotas"
                cluster.custom.create_namespaced_custom_object(group, version, NAMESPACE, plural, body)
        yield running
        assert running.interrupt() == 0, running.output()


@pytest.fixture(scope="module")
def page(demo: Up) -> Iterator[Page]:
    try:
        with Chromium.launch() as browser:
            tab = browser.page()
            tab.navigate(demo.state().components["dashboard"].url + "/")
            yield tab
    except BrowserUnavailable as e:
        pytest.skip(str(e))


def test_the_map_shows_the_demos_pods_on_their_gpus(demo: Up, page: Page) -> None:
    with demo.cluster() as cluster:
        bound = [p for p in cluster.pods(NAMESPACE) if p.node_name]
    expected = sorted(
        f"{p.node_name}/{a.minor}:{p.key}"
        for p in bound
        for a in allocation.from_pod_annotations(p.annotations).get(DeviceType.GPU, ())
    )
    assert len(expected) >= 6, bound  # the demo places whole GPUs, shares and gangs
    shown = page.wait_for(
        f"""(() => {{
          const got = [...document.querySelectorAll('.gpu .fill')]
            .map(f => f.closest('.gpu').dataset.gpu + ':' + f.dataset.pod)
            .filter(x => x.includes(':{NAMESPACE}/')).sort();
          return got.length === {len(expected)} ? got : null;
        }})()""",
        timeout=60,
    )
    assert shown == expected
    totals = page.evaluate("document.getElementById('total-gpus').textContent")
    assert totals.startswith("16")


def test_a_failing_gpu_turns_red_without_a_reload(demo: Up, page: Page) -> None:
    page.evaluate("window.__notReloaded = true")
    cell = "document.querySelector('[data-gpu=\"sim-2/7\"]')"
    assert page.evaluate(f"{cell}.classList.contains('unhealthy')") is False
    status, body = demo.ask("agent/sim-2", "POST", "/debug/simulate/xid?minor=7&xid=79")
    assert status == 200 and json.loads(body)["xid"] == 79
    page.wait_for(f"{cell}.classList.contains('unhealthy')", timeout=30)
    assert page.evaluate(f"{cell}.querySelector('.xid').textContent") == "Xid79"
    assert page.evaluate("window.__notReloaded") is True
    assert "1 unhealthy" in page.evaluate("document.getElementById('total-gpus').textContent")


def test_a_pending_pods_reason_appears(page: Page) -> None:
    page.evaluate("location.hash = '#pending'")
    row = f"document.querySelector('tr[data-pod=\"{NAMESPACE}/too-big\"]')"
    text = page.wait_for(f"{row} && !{row}.closest('.page').hidden && {row}.textContent", timeout=30)
    assert "Insufficient gpu devices" in text
    assert page.evaluate(f"{row}.querySelector('.stage').textContent") == "devices"


def test_gangs_and_quotas_are_listed(page: Page) -> None:
    page.evaluate("location.hash = '#gangs'")
    gang = page.wait_for(f"document.querySelector('tr[data-gang=\"{NAMESPACE}/big\"]')?.textContent", timeout=30)
    assert "0 bound / 4 waiting" in gang
    quotas = page.wait_for("[...document.querySelectorAll('.quota')].map(q => q.dataset.quota)", timeout=30)
    ours = [f"{NAMESPACE}/org", f"{NAMESPACE}/inference", f"{NAMESPACE}/training"]
    # The demo's own quotas (its two teams) are listed too; ours come as a tree: parent, children.
    assert [q for q in quotas if q in ours] == ours


#: A Reservation of half a GPU that stays Available while its owner runs on part of it.
_RESERVED = "e2e-half-gpu"
_OWNER_LABELS = {"app": "e2e-reserved"}


def _create(demo: Up, resource: names.GroupVersionResource, manifest: dict[str, Any]) -> None:
    """Create a cluster-scoped object as a user would (status, uid and timestamp are the server's)."""
    body = {**manifest, "metadata": {k: v for k, v in manifest["metadata"].items() if k in ("name", "annotations")}}
    body.pop("status", None)
    with demo.cluster() as cluster:
        cluster.custom.create_cluster_custom_object(resource.group, resource.version, resource.plural, body)


def test_a_reservation_is_reserved_on_the_map_and_listed_with_migrations(demo: Up, page: Page) -> None:
    held = reservation_manifest(_RESERVED, gpus={0: 50}, owner_labels=_OWNER_LABELS, ttl="2h")
    held["spec"]["allocateOnce"] = False
    held["spec"]["template"]["metadata"]["namespace"] = NAMESPACE
    _create(demo, names.RESERVATIONS, held)
    _create(demo, names.RESERVATIONS, reservation_manifest("e2e-broken", ttl="forever"))
    _create(demo, names.POD_MIGRATION_JOBS, migration_manifest("e2e-missing", pod=f"{NAMESPACE}/no-such-pod"))
    broken_job = migration_manifest("e2e-broken-job")
    broken_job["spec"]["ttl"] = "soon"
    _create(demo, names.POD_MIGRATION_JOBS, broken_job)
    page.evaluate("location.hash = '#map'")
    cell = page.wait_for(
        f"document.querySelector('.gpu .fill.reserved[data-reservation=\"{_RESERVED}\"]')?.closest('.gpu').title",
        timeout=60,
    )
    assert f"reserved by {_RESERVED} for labels app=e2e-reserved: gpu-core 50%" in cell

    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "e2e-owner", "labels": _OWNER_LABELS},
        "spec": {
            "schedulerName": names.SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": "demo",
                    "resources": {"limits": {names.GPU_CORE: "25", names.GPU_MEMORY_RATIO: "25"}},
                }
            ],
        },
    }
    with demo.cluster() as cluster:
        cluster.create_pods(NAMESPACE, [owner])
    marked = page.wait_for(
        f"document.querySelector('.gpu .fill.consumed[data-pod=\"{NAMESPACE}/e2e-owner\"]')?.dataset.reservation",
        timeout=60,
    )
    assert marked == _RESERVED

    page.evaluate("location.hash = '#reservations'")
    row = f"document.querySelector('tr[data-reservation=\"{_RESERVED}\"]')"
    # The scheduler's status pass writes the owner into currentOwners (allocateOnce false: still Available).
    owned = f"{row}.textContent.includes('{NAMESPACE}/e2e-owner')"
    text = page.wait_for(f"{row} && !{row}.closest('.page').hidden && {owned} && {row}.textContent", timeout=60)
    assert "Available" in text and "labels app=e2e-reserved" in text and f"{NAMESPACE}/e2e-owner" in text
    bad = page.wait_for("document.querySelector('tr[data-reservation=\"e2e-broken\"]')?.textContent", timeout=30)
    assert "Invalid" in bad and "spec.ttl" in bad
    job = "document.querySelector('tr[data-migration=\"e2e-missing\"]')?.textContent"
    missing = page.wait_for(f"(t => t && t.includes('Failed') && t)({job})", timeout=60)
    assert "no-such-pod" in missing
    invalid = page.wait_for("document.querySelector('tr[data-migration=\"e2e-broken-job\"]')?.textContent", timeout=30)
    assert "Invalid" in invalid and "spec.ttl" in invalid


def test_every_page_is_captured(page: Page, tmp_path: Path) -> None:
    wanted = os.environ.get("TESSERA_SCREENSHOTS")
    out = Path(wanted) if wanted else tmp_path
    page.wait_for("!!document.querySelector('#pods-per-second')", timeout=30)
    for name in PAGES:
        page.evaluate(f"location.hash = '#{name}'; document.getElementById('detail').hidden = true")
        page.wait_for(f"!document.getElementById('page-{name}').hidden")
        if name == "map":  # show the detail panel of a shared GPU: the reserved one, when there is one
            page.evaluate(
                f"(document.querySelector('.fill.reserved[data-reservation=\"{_RESERVED}\"]')?.closest('.gpu')"
                " ?? document.querySelector('[data-gpu=\"sim-1/0\"]')).click()"
            )
        path = out / f"dashboard-{name}.png"
        page.screenshot(path)
        data = path.read_bytes()
        assert data.startswith(_PNG) and len(data) > 10_000, path


def test_tessera_up_prints_the_dashboards_url(demo: Up) -> None:
    url = demo.state().components["dashboard"].url
    assert url.startswith("http://127.0.0.1:")
    assert f"Dashboard: {url}/" in demo.output()
