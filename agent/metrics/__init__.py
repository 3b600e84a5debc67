"""Prometheus metrics of the node's GPUs and of the agent, and the HTTP exporter serving them."""

from agent.metrics.containers import ContainerRef, ContainerResolver
from agent.metrics.exporter import MetricsExporter
from agent.metrics.gpu import GPUMetrics

__all__ = ["ContainerRef", "ContainerResolver", "GPUMetrics", "MetricsExporter"]
