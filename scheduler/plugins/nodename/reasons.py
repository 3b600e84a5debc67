"""Rejection reasons of NodeName, worded as kube-scheduler's."""

MISMATCH = "node(s) didn't match the requested node name"
