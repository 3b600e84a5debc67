"""Rejection reasons of TaintToleration, worded as kube-scheduler's."""

#: Formatted with the taint's key and value.
UNTOLERATED_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"
