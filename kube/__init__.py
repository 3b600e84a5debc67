"""Talking to Kubernetes: the only package that uses the `kubernetes` client library.

Holds client construction, informers, patch helpers, leader election, events, logging set-up and
the embedded API server (`kube.apiserver`). Imports `apis` only.
"""
