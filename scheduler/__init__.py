"""Tessera scheduler (imports apis, kube and proto only; never another component).

The pure scheduling core lives in `cache` (cluster state), `framework` (extension points and
runtime), `plugins` (one folder each) and `core` (a synchronous driver); `whatif` and
`simulation` run it on snapshots and traces. See docs/scheduling.md. This module imports
nothing, so importing one layer never drags in the others.
"""
