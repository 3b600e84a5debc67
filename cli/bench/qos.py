"""Node QoS: the reconciler's CPU cost for N pods, and the BE suppression loop's cost and reaction time.

Runs against real cgroups (root and a cgroup v1 hierarchy, as on the development machines) in a
throwaway `tessera-qos-bench-*` subtree that is removed afterwards:

- reconciler: N pods (a third each LS, LSR, BE with batch resources; two containers each), one
  pass that writes everything, then `--passes` steady-state passes; CPU time (process time, i.e.
  what the agent pays) and wall time per pass;
- suppression: CPU time of one `BESuppressor.step()` with the real sampler over the same pods;
  then, with a CPU hog in a BE pod and the loop running at `--period`, the time from starting a
  CPU hog in an LS pod until the suppression step whose sample shows it (at least half a core of
  non-BE use) — that step writes the new BE quota at once — over `--trials` trials, with the BE
  quota before and after.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from agent.qos import knobs
from agent.qos.cgroups import Cgroup, CgroupError, Hierarchy
from agent.qos.config import CPUSuppressConfig, QoSConfig
from agent.qos.knobs import CgroupVersion
from agent.qos.reconciler import Reconciler
from agent.qos.scratch import ScratchTree
from agent.qos.suppress import BESuppressor
from agent.qos.usage import CgroupUsageSampler, UsageSample
from apis.errors import ConfigError
from apis.extension import names
from apis.extension.qos import KubeQoSClass
from apis.k8s.core import Pod
from cli.bench._report import Latencies, Report, Timer

HOG = "while True: pass"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pods", type=int, default=100, help="pods in the reconciler benchmark (default 100)")
    parser.add_argument("--passes", type=int, default=20, help="steady-state reconcile passes to time (default 20)")
    parser.add_argument("--trials", type=int, default=3, help="suppression reaction trials (default 3)")
    parser.add_argument("--period", type=float, default=1.0, help="suppression loop period in seconds (default 1)")
    parser.add_argument(
        "--threshold", type=int, default=65, help="cpuSuppressThresholdPercent for the reaction trials (default 65)"
    )
    parser.add_argument("--skip-reaction", action="store_true", help="only measure CPU costs (no CPU hogs)")


def run(args: argparse.Namespace, report: Report) -> int:
    if os.geteuid() != 0:
        raise ConfigError("tessera bench qos needs root (it creates cgroups)")
    try:
        hierarchy = Hierarchy.detect()
    except CgroupError as e:
        raise ConfigError(str(e)) from e
    if hierarchy.version is not CgroupVersion.V1:
        raise ConfigError("tessera bench qos measures on cgroup v1 (this machine runs v2)")
    report.setting(
        cgroup=hierarchy.version.value,
        pods=args.pods,
        passes=args.passes,
        trials=0 if args.skip_reaction else args.trials,
        period=args.period,
        threshold=args.threshold,
    )
    with ScratchTree(hierarchy, prefix="tessera-qos-bench") as tree:
        pods = [_pod(i) for i in range(args.pods)]
        for pod in pods:
            tree.add_pod(pod)
        _bench_reconciler(report, tree, pods, args.passes)
        _bench_suppress_step(report, tree, pods)
    if not args.skip_reaction:
        with ScratchTree(hierarchy, prefix="tessera-qos-bench") as tree:
            _bench_reaction(report, tree, args.trials, args.period, args.threshold)
    return 0


def _pod(i: int) -> Pod:
    kind = i % 3
    if kind == 0:  # LS (Burstable)
        resources = {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}
        labels: dict[str, str] = {}
    elif kind == 1:  # LSR (Guaranteed)
        resources = {"limits": {"cpu": "500m", "memory": "128Mi"}}
        labels = {}
    else:  # BE with batch resources
        resources = {
            "requests": {names.BATCH_CPU: "500", names.BATCH_MEMORY: "64Mi"},
            "limits": {names.BATCH_CPU: "1000", names.BATCH_MEMORY: "128Mi"},
        }
        labels = {names.LABEL_QOS_CLASS: "BE"}
    uid = f"00000000-0000-4000-8000-{i:012d}"
    containers = [{"name": n, "resources": resources} for n in ("app", "sidecar")]
    return Pod.from_dict(
        {
            "metadata": {"name": f"bench-{i}", "namespace": "bench", "uid": uid, "labels": labels},
            "spec": {"containers": containers},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {"name": c["name"], "containerID": f"containerd://{i:032x}{j:032x}"}
                    for j, c in enumerate(containers)
                ],
            },
        }
    )


class _Costs:
    """CPU time (what the agent pays: process time) and wall time of repeated calls."""

    def __init__(self) -> None:
        self.cpu = Timer(time.process_time)
        self.wall = Timer()

    def call(self, fn: Callable[[], object]) -> None:
        with self.cpu.time(), self.wall.time():
            fn()


def _bench_reconciler(report: Report, tree: ScratchTree, pods: list[Pod], passes: int) -> None:
    reconciler = Reconciler(cgroups=tree.kube, pods=lambda: pods, config=QoSConfig())
    first = _Costs()
    first.call(reconciler.reconcile_once)
    second = reconciler.reconcile_once()
    if second.changes or second.errors:
        report.note(f"reconciler: second pass not steady: {len(second.changes)} changes, errors {second.errors}")
    report.value(
        "reconcile_first_pass_cpu_ms",
        first.cpu.samples[0] * 1e3,
        "ms",
        label=f"reconciler, first pass (writes), {len(pods) * 3} cgroups: CPU",
        reconcile_first_pass_wall_ms=first.wall.samples[0] * 1e3,
    )
    steady = _Costs()
    for _ in range(passes):
        steady.call(reconciler.reconcile_once)
    cpu = steady.cpu.summary()
    report.latencies(cpu, "reconcile_pass_cpu", label="reconciler, steady pass: CPU")
    report.latencies(steady.wall.summary(), "reconcile_pass_wall", label="reconciler, steady pass: wall")
    report.value(
        "reconcile_cpu_percent_at_10s", cpu.p50_ms / 10e3 * 100, "% of a core", label="reconciler at a 10 s interval"
    )


def _bench_suppress_step(report: Report, tree: ScratchTree, pods: list[Pod]) -> None:
    config = QoSConfig(cpu_suppress=CPUSuppressConfig(enable=True))
    sampler = CgroupUsageSampler(tree.kube, lambda: pods)
    suppressor = BESuppressor(cgroups=tree.kube, sampler=sampler, config=config, registry=None)
    suppressor.step()
    steps = Timer(time.process_time)
    for _ in range(20):
        with steps.time():
            suppressor.step()
    cpu = steps.summary()
    report.latencies(cpu, "suppress_step_cpu", label=f"suppression step, {len(pods)} pods: CPU")
    report.value(
        "suppress_cpu_percent_at_1s", cpu.p50_ms / 1e3 * 100, "% of a core", label="suppression at a 1 s period"
    )


class _Recorder:
    """A `Sampler` that remembers when each sample was taken (the step writes right after)."""

    def __init__(self, inner: CgroupUsageSampler) -> None:
        self.inner = inner
        self.samples: list[tuple[float, UsageSample]] = []

    def sample(self) -> UsageSample | None:
        s = self.inner.sample()
        if s is not None:
            self.samples.append((time.monotonic(), s))
        return s

    def wait_seen(self, started: float, non_be_milli: int, timeout_s: float) -> float | None:
        """When a sample taken after `started` first showed at least `non_be_milli` of non-BE use."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = next((t for t, s in self.samples if t > started and s.non_be_used_milli >= non_be_milli), None)
            if seen is not None:
                return seen
            time.sleep(0.01)
        return None


def _bench_reaction(report: Report, tree: ScratchTree, trials: int, period: float, threshold: int) -> None:
    """Time from an LS CPU hog starting until the suppression step that sees it (and cuts BE)."""
    ls_pod, be_pod = _pod(0), _pod(2)
    ls_cg, be_cg = tree.add_pod(ls_pod), tree.add_pod(be_pod)
    tree.spawn(be_cg, HOG)
    sampler = _Recorder(CgroupUsageSampler(tree.kube, lambda: [ls_pod, be_pod]))
    config = QoSConfig(cpu_suppress=CPUSuppressConfig(enable=True, threshold_percent=threshold))
    suppressor = BESuppressor(cgroups=tree.kube, sampler=sampler, config=config, registry=None, period_s=period)
    be_root = tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT)
    suppressor.start()
    reactions: list[float] = []
    try:
        for trial in range(1, trials + 1):
            before = _settled(be_root, period)
            started = time.monotonic()
            hog = tree.spawn(ls_cg, HOG)
            seen = sampler.wait_seen(started, 500, 30)
            if seen is not None:
                time.sleep(min(0.2, period / 2))  # let that step finish its write
                reactions.append(seen - started)
                report.note(
                    f"trial {trial}: LS load seen {reactions[-1]:.2f} s after the hog started; "
                    f"BE quota {before / 1e5:.2f} -> {_quota(be_root) / 1e5:.2f} cores in that step"
                )
            else:
                report.note(f"trial {trial}: LS load not seen within 30 s")
            hog.kill()
            hog.wait()
    finally:
        suppressor.stop()
    if reactions:
        report.latencies(Latencies.of(reactions), "suppress_reaction", label="suppression reaction time")


def _settled(cg: Cgroup, period: float) -> int:
    """The BE quota once it stops rising (recovery is +10% of the node per step), at most 30 s."""
    deadline = time.monotonic() + 30
    last = _quota(cg)
    while time.monotonic() < deadline:
        time.sleep(period * 2.5)
        now = _quota(cg)
        if now <= last:
            return now
        last = now
    return last


def _quota(cg: Cgroup) -> int:
    """The BE limit in us per 100 ms (unlimited: a huge number)."""
    limit = cg.read(knobs.CPU_MAX)
    return 1 << 62 if limit.unlimited else limit.quota * 100_000 // limit.period
