"""`.proto` files and their generated Python (hack/gen-proto.sh). Imports nothing of ours.

- `proto.runtime.v1alpha1`: the runtime hook service, wire-compatible with Koordinator's.
- `proto.scheduler.v1`: Tessera's scheduler API (Schedule, Explain, GetNodeDevices).
- `proto.kubelet.dra.v1`, `proto.kubelet.pluginregistration.v1`: kubelet's DRA plugin and plugin
  registration APIs, which the agent serves as a DRA driver (and the simulated kubelet calls).
"""
