"""Prometheus metrics of the node's GPUs and of the agent (served on `/metrics` by the agent's
`kube.serving.Server`)."""

from agent.metrics.containers import ContainerRef, ContainerResolver
from agent.metrics.gpu import GPUMetrics

__all__ = ["ContainerRef", "ContainerResolver", "GPUMetrics"]
