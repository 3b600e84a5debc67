"""Rejection reasons of NodeUnschedulable, worded as kube-scheduler's."""

UNSCHEDULABLE = "node(s) were unschedulable"
