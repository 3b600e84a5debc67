"""GPUFragmentation: scores nodes by how little a placement grows GPU fragmentation (FGD)."""

from scheduler.plugins.gpufragmentation.args import DEFAULT_BALANCE_PERCENT, GPUFragmentationArgs
from scheduler.plugins.gpufragmentation.plugin import NAME, GPUFragmentation, new

__all__ = ["DEFAULT_BALANCE_PERCENT", "NAME", "GPUFragmentation", "GPUFragmentationArgs", "new"]
