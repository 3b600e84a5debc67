"""Hypothesis strategies for protocol objects, shared by the property tests."""

from hypothesis import strategies as st

from apis.crds.device import Device, DeviceInfo, DeviceTopology, DeviceType, VirtualFunction, VirtualFunctionGroup
from apis.extension import names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.meta import Condition, ObjectMeta

label_text = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,10}[a-z0-9])?", fullmatch=True)
labels = st.dictionaries(label_text, label_text, max_size=3)
amounts = st.integers(min_value=0, max_value=2**50)
resource_names = st.sampled_from([names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO, names.RDMA, names.FPGA])
resource_lists = st.dictionaries(resource_names, amounts, max_size=4)
bus_ids = st.from_regex(r"0000:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", fullmatch=True)


@st.composite
def device_infos(draw: st.DrawFn) -> DeviceInfo:
    seen: set[str] = set()  # a VF is listed once per device (`Device.from_dict` drops repeats)
    return DeviceInfo(
        type=draw(st.sampled_from(list(DeviceType))),
        minor=draw(st.integers(min_value=0, max_value=255)),
        id=draw(st.one_of(st.just(""), st.uuids().map(lambda u: f"GPU-{u}"))),
        module_id=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=16))),
        health=draw(st.booleans()),
        resources=draw(resource_lists),
        topology=draw(
            st.one_of(
                st.none(),
                st.builds(
                    DeviceTopology,
                    socket_id=st.integers(-1, 3),
                    node_id=st.integers(0, 7),
                    pcie_id=st.from_regex(r"pci0000:[0-9a-f]{2}", fullmatch=True),
                    bus_id=st.one_of(st.just(""), bus_ids),
                ),
            )
        ),
        vf_groups=tuple(
            VirtualFunctionGroup(
                labels=group_labels, vfs=tuple(vf for vf in vfs if vf.key not in seen and not seen.add(vf.key))
            )
            for group_labels, vfs in draw(
                st.lists(
                    st.tuples(
                        labels,
                        st.lists(st.builds(VirtualFunction, minor=st.integers(-1, 64), bus_id=bus_ids), max_size=3),
                    ),
                    max_size=2,
                )
            )
        ),
        labels=draw(labels),
        conditions=tuple(
            draw(
                st.lists(
                    st.builds(
                        Condition,
                        type=st.just(names.CONDITION_HEALTHY),
                        status=st.sampled_from(["True", "False", "Unknown"]),
                        reason=label_text,
                        message=st.text(max_size=20),
                        last_transition_time=st.just("2024-01-02T03:04:05Z"),
                    ),
                    max_size=1,
                )
            )
        ),
    )


@st.composite
def devices(draw: st.DrawFn) -> Device:
    infos = draw(st.lists(device_infos(), max_size=8, unique_by=lambda d: (d.type, d.minor)))
    meta = ObjectMeta(
        name=draw(label_text),
        labels=draw(labels),
        annotations=draw(st.dictionaries(label_text, st.text(max_size=8), max_size=2)),
        resource_version=str(draw(st.integers(1, 10**6))),
    )
    gpus = sorted(d.minor for d in infos if d.type is DeviceType.GPU)
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    links = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    nvlink: dict[int, set[int]] = {}
    for a, b in links:
        nvlink.setdefault(a, set()).add(b)
        nvlink.setdefault(b, set()).add(a)
    return Device(
        meta=meta,
        devices=tuple(sorted(infos, key=lambda d: d.sort_key)),
        nvlink={m: frozenset(p) for m, p in nvlink.items()},
    )


@st.composite
def allocations(draw: st.DrawFn) -> dict[DeviceType, tuple[DeviceAllocation, ...]]:
    out = {}
    for dtype in draw(st.sets(st.sampled_from(list(DeviceType)), max_size=3)):
        minors = draw(st.lists(st.integers(0, 255), min_size=1, max_size=4, unique=True))
        out[dtype] = tuple(
            DeviceAllocation(
                minor=m,
                resources=draw(resource_lists),
                id=draw(st.one_of(st.just(""), st.uuids().map(str))),
                vfs=tuple(
                    draw(st.lists(st.builds(VFAllocation, minor=st.integers(-1, 64), bus_id=bus_ids), max_size=2))
                ),
                gpu_shared_resource_template=draw(st.sampled_from(["", "1g.10gb"])),
            )
            for m in minors
        )
    return out
