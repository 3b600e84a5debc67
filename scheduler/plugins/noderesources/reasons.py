"""Rejection reasons of NodeResourcesFit, worded as kube-scheduler's."""

#: Formatted with the resource name (`Insufficient cpu`).
INSUFFICIENT = "Insufficient {resource}"
TOO_MANY_PODS = "Too many pods"
