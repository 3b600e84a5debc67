"""GPUFragmentation: scores nodes by how little a placement grows GPU fragmentation (FGD)."""

from scheduler.plugins.gpufragmentation.args import GPUFragmentationArgs
from scheduler.plugins.gpufragmentation.plugin import NAME, GPUFragmentation, new

__all__ = ["NAME", "GPUFragmentation", "GPUFragmentationArgs", "new"]
