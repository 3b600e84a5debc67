"""Tessera's RDMA NIC driver in DRA terms: `rdma.tessera.dev`, beside the GPU driver.

A node's RDMA NICs are published as a second pool (pool name = node name) of their own driver,
so a claim asks for a NIC with the DeviceClass or selector of that driver and can pair it with
a GPU through kube's standard `resource.kubernetes.io/pcieRoot` (`matchAttribute`). Each
physical function is one device `rdma-<minor>` (minor from `mlx5_<minor>`) and each of its
SR-IOV virtual functions one device `rdma-<minor>-vf-<index>`; none is shared (no capacity):
a VF is what a pod gets, the PF for a pod that needs the whole port.

Attributes: `type` (`pf` or `vf`), `minor` (the PF's minor, on its VFs too), `ibDevice`
(`mlx5_0`, the PF's), `numaNode`, kube's standard `resource.kubernetes.io/pcieRoot` and
`pciBusID` (a VF's own address where it has one). A PF whose ports are down is unhealthy: it
and its VFs carry the taint `rdma.tessera.dev/unhealthy=<reason>:NoSchedule`, as a GPU does.
"""

from __future__ import annotations

from typing import Final

from apis.extension import names

__all__ = ["DRIVER", "IB_DEVICE", "MINOR", "NUMA_NODE", "TYPE", "TYPE_PF", "TYPE_VF", "UNHEALTHY_TAINT"]

DRIVER: Final = f"rdma.{names.TESSERA_DOMAIN}"
TYPE: Final = "type"
TYPE_PF: Final = "pf"
TYPE_VF: Final = "vf"
MINOR: Final = "minor"
IB_DEVICE: Final = "ibDevice"
NUMA_NODE: Final = "numaNode"
UNHEALTHY_TAINT: Final = f"{DRIVER}/unhealthy"
