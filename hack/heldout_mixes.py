"""The held-out evaluation of the default placement (issue 32): mixes of the Alibaba trace's
cluster that the trace does not ship, built by `tessera simulate`'s mix knobs, each replayed
with `tessera simulate --scoring BalancedFGD,FGD,LeastAllocated` side by side.

The protocol (docs/scheduling.md, "Held-out mixes"): mixes are split in two sets that share no
mix seed and no replay seed. The `dev` set (mix seeds 100 and up, replay seed 1) is what the
policy was developed and checked on; the `report` set (mix seeds 1-13, replay seeds 11-13) was
written down before any of its runs and is only ever reported, never tuned on. A mix is a
`tessera simulate` flag list; its seed is `--mix-seed`.

    PYTHONPATH=. .venv/bin/python hack/heldout_mixes.py --set report [--only 2,3] [--jobs 2] [--save DIR]

prints, per mix, unallocated GPU % at x = 100 (mean over the seeds) for each policy, the better
of FGD and LeastAllocated, and how far the default is from it (negative: better). Each mix is
one `tessera simulate` process (minutes of CPU: 3 policies × 3 seeds of ~10,000 pods).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

POLICIES = ("BalancedFGD", "FGD", "LeastAllocated")

#: name -> (knob flags, mix seed). Written down before any report run.
REPORT: dict[str, tuple[str, int]] = {
    "constrained 25 % (pool)": ("--constrained 25", 1),
    "constrained 33 % (pool)": ("--constrained 33", 2),
    "constrained 50 % (pool)": ("--constrained 50", 3),
    "constrained 25 % (capacity)": ("--constrained 25 --constraint-models capacity", 4),
    "constrained 40 % (uniform)": ("--constrained 40 --constraint-models uniform", 5),
    "sharing-heavy: shares 70 % of the GPU demand": ("--shared 70", 6),
    "multi-GPU heavy: 30 % of the GPU demand": ("--multi-gpu 30", 7),
    "CPU-only 35 % of the CPU + constrained 20 %": ("--cpu-only 35 --constrained 20", 8),
    "shares 50 % + constrained 33 %": ("--shared 50 --constrained 33", 9),
    "multi-GPU 20 % + constrained 25 % (capacity)": (
        "--multi-gpu 20 --constrained 25 --constraint-models capacity",
        10,
    ),
    "8 random share sizes + constrained 25 %": ("--random-share-sizes 8 --constrained 25", 11),
    "shares 45 %, sizes 15 … 85 %": ("--shared 45 --share-sizes 15,25,35,45,55,70,85", 12),
    "constrained 15 % (uniform), shares 35 %, multi-GPU 12 %, CPU-only 15 %": (
        "--constrained 15 --constraint-models uniform --shared 35 --multi-gpu 12 --cpu-only 15",
        13,
    ),
}
REPORT_SEEDS = "11-13"

#: The development set: what the policy was built and checked on (never reported as held-out).
DEV: dict[str, tuple[str, int]] = {
    "constrained 25 % (pool)": ("--constrained 25", 125),
    "constrained 33 % (pool)": ("--constrained 33", 133),
    "constrained 45 % (pool)": ("--constrained 45", 145),
    "constrained 30 % (capacity)": ("--constrained 30 --constraint-models capacity", 230),
    "constrained 20 % (uniform)": ("--constrained 20 --constraint-models uniform", 320),
    "shares 60 %": ("--shared 60", 460),
    "multi-GPU 25 %": ("--multi-gpu 25", 525),
    "6 random share sizes + constrained 15 %": ("--random-share-sizes 6 --constrained 15", 615),
    "CPU-only 35 %": ("--cpu-only 35", 735),
}
DEV_SEEDS = "1"


def simulate(flags: str, mix_seed: int, seeds: str, jobs: int, data: Path | None) -> dict[str, object]:
    """`tessera simulate -o json` of the mix, the three policies side by side."""
    command = [
        sys.executable,
        "-m",
        "cli",
        "simulate",
        *(["--data", str(data)] if data is not None else []),
        *flags.split(),
        "--mix-seed",
        str(mix_seed),
        "--seeds",
        seeds,
        "--scoring",
        ",".join(POLICIES),
        "--jobs",
        str(jobs),
        "-o",
        "json",
    ]
    doc: dict[str, object] = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("report", "dev"), default="report")
    parser.add_argument("--only", help="mix numbers to run, 1-based, comma-separated (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="processes per mix (default 2)")
    parser.add_argument("--save", type=Path, metavar="DIR", help="also write each mix's JSON there")
    parser.add_argument("--data", type=Path, help="trace folder (default: tessera simulate's)")
    args = parser.parse_args()
    mixes, seeds = (REPORT, REPORT_SEEDS) if args.set == "report" else (DEV, DEV_SEEDS)
    chosen = {int(n) for n in args.only.split(",")} if args.only else set(range(1, len(mixes) + 1))
    print(f"| mix ({args.set} set, seeds {seeds}) | " + " | ".join(POLICIES) + " | best other | default vs it |")
    print("| --- " * (len(POLICIES) + 3) + "|")
    for number, (name, (flags, mix_seed)) in enumerate(mixes.items(), start=1):
        if number not in chosen:
            continue
        doc = simulate(flags, mix_seed, seeds, args.jobs, args.data)
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{args.set}-{number:02d}.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        policies = doc["policies"]
        assert isinstance(policies, dict)
        result = {name: float(policies[name]["unallocated_gpu_pct_at_100"]["mean"]) for name in POLICIES}
        best = min(result[p] for p in POLICIES[1:])
        gap = 100 * (result[POLICIES[0]] - best) / best
        cells = " | ".join(f"{result[p]:.2f}" for p in POLICIES)
        print(f"| {number}. {name} | {cells} | {best:.2f} | {gap:+.1f} % |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
