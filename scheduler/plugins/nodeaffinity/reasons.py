"""Rejection reasons of NodeAffinity, worded as kube-scheduler's."""

MISMATCH = "node(s) didn't match Pod's node affinity/selector"
