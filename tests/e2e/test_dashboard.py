"""The dashboard in a real headless Chromium against `tessera up --demo`, as a person sees it.

The map shows the demo's pods on the GPUs their `device-allocated` annotations name; a GPU
failing through the agent's fault-injection endpoint turns red without a reload; a pending pod's
reason appears with the scheduler's chain. Every page is captured as a PNG: into the test's
temporary directory, or into `$TESSERA_SCREENSHOTS` (`make screenshots` points it at
docs/images). Skips, saying why, where there is no Chromium (`make test` installs Debian's as
root).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from cli.localcluster.demo import NAMESPACE
from tests.e2e.harness import START_TIMEOUT_S, Up
from tests.support.browser import BrowserUnavailable, Chromium, Page, chromium_binary
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

PAGES = ("map", "pending", "gangs", "scheduler")
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
    agent = demo.state().components["agent/sim-2"].url
    page.evaluate("window.__notReloaded = true")
    cell = "document.querySelector('[data-gpu=\"sim-2/7\"]')"
    assert page.evaluate(f"{cell}.classList.contains('unhealthy')") is False
    request = urllib.request.Request(f"{agent}/debug/simulate/xid?minor=7&xid=79", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.load(response)["xid"] == 79
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


def test_every_page_is_captured(page: Page, tmp_path: Path) -> None:
    wanted = os.environ.get("TESSERA_SCREENSHOTS")
    out = Path(wanted) if wanted else tmp_path
    page.wait_for("!!document.querySelector('#pods-per-second')", timeout=30)
    for name in PAGES:
        page.evaluate(f"location.hash = '#{name}'; document.getElementById('detail').hidden = true")
        page.wait_for(f"!document.getElementById('page-{name}').hidden")
        if name == "map":  # show the detail panel of a shared GPU
            page.evaluate("document.querySelector('[data-gpu=\"sim-1/0\"]').click()")
        path = out / f"dashboard-{name}.png"
        page.screenshot(path)
        data = path.read_bytes()
        assert data.startswith(_PNG) and len(data) > 10_000, path


def test_tessera_up_prints_the_dashboards_url(demo: Up) -> None:
    url = demo.state().components["dashboard"].url
    assert url.startswith("http://127.0.0.1:")
    assert f"Dashboard: {url}/" in demo.output()
