"""Tessera agent (imports apis, kube and proto only; never another component)."""
