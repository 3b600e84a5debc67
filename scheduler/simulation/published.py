"""The FGD paper's published results on the Alibaba traces (the trace README's table): the
unallocated GPU % at x = 100, mean over 10 seeds, per trace and policy. `tessera simulate`
prints them beside its own so that a run is read against the reference."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["POLICIES", "PUBLISHED"]

#: The paper's policies, in its column order.
POLICIES: tuple[str, ...] = ("Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD")

_ROWS = {
    "default": (13.70, 9.38, 8.35, 8.22, 7.14, 4.77),
    "gpushare40": (15.14, 10.70, 10.24, 10.23, 8.56, 6.04),
    "multigpu20": (13.08, 8.15, 6.66, 6.50, 6.27, 4.47),
    "gpuspec10": (13.74, 9.83, 8.04, 7.76, 6.90, 5.34),
    "cpu050": (10.98, 6.97, 6.48, 6.54, 6.44, 5.00),
}

#: trace -> policy -> unallocated GPU % at x = 100.
PUBLISHED: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {trace: MappingProxyType(dict(zip(POLICIES, row, strict=True))) for trace, row in _ROWS.items()}
)
