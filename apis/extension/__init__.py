"""Koordinator's protocol on top of Kubernetes: resource, label and annotation names, the
annotation codecs (device-allocated, allocate hints, gang, quota, reservation affinity), QoS classes and the rules for
device requests. As Koordinator's `apis/extension`."""
