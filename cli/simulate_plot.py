"""`tessera simulate --plot`: unallocated GPU % against arrived load, one line per policy, as the
FGD paper's figure. matplotlib is an optional extra (`pip install 'tessera[plot]'`): only this
command needs it, and the scheduler must not pull a plotting stack into its image."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PlotUnavailable", "check_available", "plot_curves"]


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'tessera[plot]'") from None
    matplotlib.use("Agg")  # files only, never a window
    return importlib.import_module("matplotlib.pyplot")


def check_available() -> None:
    """Raises PlotUnavailable before a long run that could not end in its plot."""
    _pyplot()


def plot_curves(
    curves: Mapping[str, Mapping[int, float]],
    path: Path,
    *,
    title: str,
    reference: Mapping[str, float] | None = None,
) -> None:
    """One line per policy (x -> unallocated GPU %); `reference`, published values at x = 100,
    as markers. Raises PlotUnavailable or OSError."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    try:
        for name, curve in curves.items():
            xs = sorted(curve)
            ax.plot(xs, [curve[x] for x in xs], label=name, linewidth=1.6)
        for name, value in (reference or {}).items():
            ax.plot([100], [value], marker="x", linestyle="none", label=f"{name} (paper, x=100)")
        ax.axvline(100, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xlabel("arrived GPU demand (% of cluster GPU capacity)")
        ax.set_ylabel("unallocated GPU (% of capacity)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
