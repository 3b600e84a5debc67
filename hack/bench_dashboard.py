"""The dashboard at scale: first paint and update latency in a real headless Chromium.

    PYTHONPATH=. .venv/bin/python hack/bench_dashboard.py --nodes 500 --gpus 8

Starts the embedded API server, creates NODES Device CRs (GPUS GPUs, one RDMA NIC per two GPUs)
and pods holding shares of about half the GPUs, plus pending pods, then `tessera dashboard`,
and measures in Chromium:

- first paint: from navigation until the whole map is drawn (`window.tesseraFirstPaintMs`,
  set in the frame after the first state is applied), over `--loads` page loads;
- update latency: from a Device CR update (a GPU marked unhealthy, then healthy again) to the
  moment the cell's class changes in the page (a MutationObserver's clock; same machine, same
  clock), over `--updates` changes;
- the longest main-thread task while a burst of changes (one GPU on every tenth node) arrives
  (PerformanceObserver `longtask`: anything above 50 ms), i.e. whether the page freezes;
- the server's rebuild of the whole state (the pure view, in this process, on the same objects).

Prints one line per measure (median, p95, max) and a JSON document with `--json`. A developer
tool, not a test: nothing asserts a time (docs/user/dashboard.md records what it measured).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from concurrent import futures
from dataclasses import replace
from pathlib import Path

from apis.crds.device import Device
from apis.extension import names
from apis.k8s.core import Pod
from cli.launchers.apiserver import run_apiserver
from cli.launchers.dashboard import DashboardProcess
from cli.launchers.scheduler import pod_manifest
from dashboard import view
from kube import crds
from kube.client import Client
from kube.resources import NAMESPACES, PODS
from tests.support.browser import Chromium, Page
from tests.support.gpuobjects import make_device, make_pod

NAMESPACE = "bench"


def populate(client: Client, nodes: int, gpus: int, pending: int) -> tuple[list[Device], list[Pod]]:
    """Devices and pods: on every node, whole GPUs for one pod and halves for two others."""
    client.resource(NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    devices = [make_device(f"node-{i:04d}", gpus=gpus) for i in range(nodes)]
    pods = []
    for i in range(nodes):
        node = f"node-{i:04d}"
        pods.append(make_pod(f"train-{i}", namespace=NAMESPACE, node=node, gpus={m: 100 for m in range(gpus // 4)}))
        pods.append(make_pod(f"infer-{i}-a", namespace=NAMESPACE, node=node, gpus={gpus // 4: 50}))
        pods.append(make_pod(f"infer-{i}-b", namespace=NAMESPACE, node=node, gpus={gpus // 4: 50}))
    pods += [make_pod(f"wait-{i}", namespace=NAMESPACE, requests={names.NVIDIA_GPU: 2}) for i in range(pending)]
    api = crds.devices(client)
    pod_api = client.resource(PODS)

    def create_pod(pod: Pod) -> None:
        requests = {k: str(v) for k, v in pod.requests().items()} or {names.CPU: "100m"}
        pod_api.create(
            pod_manifest(pod.name, requests, namespace=NAMESPACE, annotations=pod.annotations, node_name=pod.node_name)
        )

    with futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(api.create, devices))
        list(pool.map(create_pod, pods))
    return devices, pods


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "max": ordered[-1],
    }


_WATCH_JS = """
window.__changed = {};
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    if (n.querySelectorAll) for (const c of n.querySelectorAll('.gpu')) {
      const key = c.dataset.gpu + ':' + c.dataset.healthy;
      window.__changed[key] ??= Date.now();
    }
  }
}).observe(document.getElementById('map'), {childList: true, subtree: true});
window.__longest = 0;
new PerformanceObserver((l) => {
  for (const e of l.getEntries()) window.__longest = Math.max(window.__longest, e.duration);
}).observe({type: 'longtask', buffered: false});
"""


def first_paints(page: Page, url: str, loads: int, gpus_total: int) -> list[float]:
    out = []
    for _ in range(loads):
        page.navigate(url)
        page.wait_for(f"document.querySelectorAll('.gpu').length === {gpus_total}", timeout=60)
        out.append(float(page.wait_for("window.tesseraFirstPaintMs", timeout=60)))
    return out


def update_latencies(page: Page, client: Client, devices: list[Device], gpus: int, updates: int) -> list[float]:
    """Break GPU 0 of a node (measured), then heal it (not measured), on `updates` nodes."""
    api = crds.devices(client)
    out = []
    for i in range(updates):
        node = devices[(i * 37) % len(devices)].node_name
        broken, healthy = f"{node}/0:false", f"{node}/0:true"
        page.evaluate(f"delete window.__changed[{json.dumps(broken)}]; delete window.__changed[{json.dumps(healthy)}]")
        sent = time.time() * 1000
        api.update(replace(make_device(node, gpus=gpus, unhealthy={0: "Xid79"}), meta=api.get(node).meta))
        out.append(float(page.wait_for(f"window.__changed[{json.dumps(broken)}]", timeout=30)) - sent)
        api.update(replace(make_device(node, gpus=gpus), meta=api.get(node).meta))
        page.wait_for(f"window.__changed[{json.dumps(healthy)}]", timeout=30)
    return out


def burst(page: Page, client: Client, devices: list[Device], gpus: int) -> tuple[float, float]:
    """Break GPU 1 on every tenth node at once; (ms until the last shows, longest task ms)."""
    api = crds.devices(client)
    chosen = devices[::10]
    page.evaluate("window.__longest = 0")
    sent = time.time() * 1000

    def fail(device: Device) -> None:
        current = api.get(device.node_name)
        api.update(replace(make_device(device.node_name, gpus=gpus, unhealthy={1: "Xid48"}), meta=current.meta))

    with futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(fail, chosen))
    keys = json.dumps([f"{d.node_name}/1:false" for d in chosen])
    last = page.wait_for(
        f"(() => {{ const t = {keys}.map(k => window.__changed[k]); return t.every(Boolean) && Math.max(...t); }})()",
        timeout=60,
    )
    time.sleep(0.5)
    return float(last) - sent, float(page.evaluate("window.__longest"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pending", type=int, default=50)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {"nodes": args.nodes, "gpus": args.gpus * args.nodes}
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp, run_apiserver() as server:
        server.install_crds()
        with server.client() as client:
            began = time.monotonic()
            devices, pods = populate(client, args.nodes, args.gpus, args.pending)
            print(
                f"created {len(devices)} devices and {len(pods)} pods in {time.monotonic() - began:.1f} s",
                file=sys.stderr,
            )
            builds = []
            for _ in range(5):
                t = time.perf_counter()
                state = view.state(
                    devices=devices,
                    pods=pods,
                    pod_groups=[],
                    quotas=[],
                    scheduler={},
                    scrapes=(None, None),
                    now=datetime.datetime.now(datetime.UTC),
                )
                builds.append((time.perf_counter() - t) * 1000)
            results["state_bytes"] = len(state.full())
            results["rebuild_ms"] = summary(builds)
            with (
                DashboardProcess(server.kubeconfig, directory=Path(tmp) / "dashboard") as dash,
                Chromium.launch() as browser,
            ):
                page = browser.page()
                results["first_paint_ms"] = summary(
                    first_paints(page, dash.url + "/", args.loads, args.nodes * args.gpus)
                )
                page.evaluate(_WATCH_JS)
                results["update_latency_ms"] = summary(update_latencies(page, client, devices, args.gpus, args.updates))
                last, longest = burst(page, client, devices, args.gpus)
                results["burst"] = {
                    "nodes_changed": len(devices[::10]),
                    "all_shown_ms": last,
                    "longest_task_ms": longest,
                }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
