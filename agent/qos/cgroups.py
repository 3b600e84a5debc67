"""The cgroup library: find the hierarchy (v1, v2 or hybrid), read and write knobs idempotently.

`Hierarchy.detect()` reads `/proc/self/mounts` once at agent start; a `Cgroup` is a path relative
to the hierarchy (`kubepods/besteffort/pod…`), the same on every v1 controller. Reads and writes
go through `agent.qos.knobs`, so the caller speaks in logical values and never in file names:

    cg = hierarchy.cgroup("kubepods/besteffort")
    cg.write(knobs.CPU_MAX, CPUMax(200_000))   # -> Change, or None when already equal

Writes are validated (range) before touching the kernel, skipped when the value already holds,
and every failure is a `CgroupError` naming the file and the value. A cgroup that vanished (the
pod is gone) raises `CgroupNotFound`; a file the kernel does not have (memory.min on a v1
kernel) raises `CgroupUnsupported`, so callers can tell "gone" and "not here" from real errors.

Creating and removing cgroups (`create`, `remove`) exists for tests and the benchmark: on a node,
kubelet and the runtime own the tree and the agent only tunes it.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from agent.qos.knobs import CgroupVersion, Knob, KnobFiles
from apis.errors import TesseraError

__all__ = [
    "CONTROLLERS",
    "Cgroup",
    "CgroupError",
    "CgroupNotFound",
    "CgroupUnsupported",
    "Change",
    "Hierarchy",
    "Throttling",
]

T = TypeVar("T")

#: The v1 controllers QoS uses; a v1 hierarchy needs at least cpu and memory.
CONTROLLERS: Final = ("cpu", "cpuacct", "cpuset", "memory")
_REQUIRED_V1: Final = frozenset({"cpu", "memory"})
_PROC_MOUNTS: Final = Path("/proc/self/mounts")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


class CgroupError(TesseraError):
    """A cgroup file could not be read or written; names the file and the value."""

    def __init__(self, path: Path | str, reason: str, *, value: str | None = None) -> None:
        shown = f" value {value!r}:" if value is not None else ""
        super().__init__(f"cgroup file {path}:{shown} {reason}")
        self.path = str(path)
        self.reason = reason
        self.value = value


class CgroupNotFound(CgroupError):
    """The cgroup directory does not exist (not created yet, or the pod is gone)."""


class CgroupUnsupported(CgroupError):
    """The cgroup exists but this kernel has no such file (e.g. memory.min on cgroup v1)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One write that happened: which cgroup, which knob, the file text before and after."""

    cgroup: str
    knob: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class Throttling:
    """CFS bandwidth statistics from cpu.stat (cumulative since the cgroup was created)."""

    nr_periods: int
    nr_throttled: int
    throttled_ns: int


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """Where the cgroup controllers are mounted, and which version they speak.

    v1: `mounts` maps each controller to its mount point (cpu and cpuacct may share one);
    v2: `mounts` is `{"": unified root}`. `page_size` is the kernel's, for memory rounding.
    """

    version: CgroupVersion
    mounts: Mapping[str, Path]
    page_size: int = field(default_factory=lambda: os.sysconf("SC_PAGE_SIZE"))

    @classmethod
    def v1(cls, mounts: Mapping[str, Path | str]) -> Hierarchy:
        missing = _REQUIRED_V1 - set(mounts)
        if missing:
            raise CgroupError(_PROC_MOUNTS, f"cgroup v1 hierarchy lacks controllers {sorted(missing)}")
        return cls(CgroupVersion.V1, {name: Path(p) for name, p in mounts.items()})

    @classmethod
    def v2(cls, root: Path | str) -> Hierarchy:
        return cls(CgroupVersion.V2, {"": Path(root)})

    @classmethod
    def detect(cls, mounts_text: str | None = None, *, source: Path = _PROC_MOUNTS) -> Hierarchy:
        """The hierarchy QoS should use, from `/proc/self/mounts` (or the text given).

        v1 (including hybrid mounts where a cgroup2 also exists, as on systemd "hybrid" hosts)
        when v1 mounts carry both cpu and memory; otherwise the cgroup2 mount. Raises
        CgroupError naming `source` when neither exists.
        """
        if mounts_text is None:
            try:
                mounts_text = source.read_text()
            except OSError as e:
                raise CgroupError(source, f"cannot read mounts: {e.strerror}") from e
        v1: dict[str, Path] = {}
        v2_roots: list[Path] = []
        for line in mounts_text.splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            mountpoint = Path(_OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1]))
            if fields[2] == "cgroup":
                for option in fields[3].split(","):
                    if option in CONTROLLERS:
                        v1.setdefault(option, mountpoint)
            elif fields[2] == "cgroup2":
                v2_roots.append(mountpoint)
        if set(v1) >= _REQUIRED_V1:
            return cls.v1(v1)
        if v2_roots:
            return cls.v2(v2_roots[0])
        raise CgroupError(source, "no cgroup v1 hierarchy with cpu and memory, and no cgroup2 mount")

    def cgroup(self, rel: str | os.PathLike[str]) -> Cgroup:
        return Cgroup(self, str(rel).strip("/"))

    def path(self, controller: str, rel: str) -> Path:
        """The directory of `rel` for `controller` ("" in v2). Raises CgroupUnsupported if unmounted."""
        return Path(self.dir(controller, rel))

    def dir(self, controller: str, rel: str) -> str:
        """`path` as a string: the hot paths (one read per knob per pass) skip pathlib's cost."""
        base = self.mounts.get(controller if self.version is CgroupVersion.V1 else "")
        if base is None:
            raise CgroupUnsupported(f"{controller}:/{rel}", f"controller {controller} is not mounted")
        return f"{os.fspath(base)}/{rel}" if rel else os.fspath(base)

    def controllers(self) -> tuple[str, ...]:
        """The controller keys of `mounts` QoS touches when creating/removing a cgroup."""
        if self.version is CgroupVersion.V2:
            return ("",)
        return tuple(c for c in CONTROLLERS if c in self.mounts)


@dataclass(frozen=True, slots=True)
class Cgroup:
    """One cgroup, as a path relative to the hierarchy root. Cheap to create; no I/O until used."""

    hierarchy: Hierarchy
    rel: str

    def __str__(self) -> str:
        return "/" + self.rel

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]

    def child(self, name: str) -> Cgroup:
        return Cgroup(self.hierarchy, f"{self.rel}/{name}" if self.rel else name)

    def parent(self) -> Cgroup | None:
        if not self.rel:
            return None
        return Cgroup(self.hierarchy, self.rel.rpartition("/")[0])

    def path(self, controller: str = "cpu") -> Path:
        return self.hierarchy.path(controller, self.rel)

    def exists(self) -> bool:
        return os.path.isdir(self.hierarchy.dir("cpu", self.rel))

    def children(self) -> list[Cgroup]:
        """Direct child cgroups (sorted by name); empty when this cgroup does not exist."""
        try:
            entries = sorted(e.name for e in os.scandir(self.path()) if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []
        return [self.child(name) for name in entries]

    def walk_bottom_up(self) -> Iterator[Cgroup]:
        """Every descendant, children before their parent, ending with this cgroup."""
        for child in self.children():
            yield from child.walk_bottom_up()
        yield self

    # --- knobs ---------------------------------------------------------------------------------------

    def supports(self, knob: KnobFiles) -> bool:
        """Whether every file of `knob` exists here (False for a vanished cgroup too)."""
        return all(os.path.exists(self._file(c, f)) for c, f in knob.files[self.hierarchy.version])

    def read(self, knob: Knob[T]) -> T:
        """The knob's current logical value. Raises CgroupError (NotFound / Unsupported)."""
        texts = self._read_texts(knob)
        return self._decode(knob, texts)

    def write(self, knob: Knob[T], value: T) -> Change | None:
        """Set `knob` to `value` unless it already holds; returns what changed, or None.

        Validates the range first; writes the files in the knob's order, each only if its text
        differs. Idempotent. Raises CgroupError naming the file and value when the kernel
        refuses (EINVAL, EBUSY), CgroupNotFound / CgroupUnsupported as documented above.
        """
        version = self.hierarchy.version
        files = [self._file(c, f) for c, f in knob.files[version]]
        problem = knob.check(value)
        if problem is not None:
            raise CgroupError(files[-1], problem, value=str(value))
        if knob.align is not None:
            value = knob.align(value, self.hierarchy.page_size)
        wanted = knob.encode[version](value)
        current = self._read_texts(knob)
        if self._decode(knob, current) == self._decode(knob, wanted):
            return None
        for path, old, new in zip(files, current, wanted, strict=True):
            if old.strip() != new:
                _write_text(path, new)
        return Change(str(self), knob.name, " ".join(t.strip() for t in current), " ".join(wanted))

    # --- statistics ----------------------------------------------------------------------------------

    def cpu_usage_ns(self) -> int:
        """CPU time used by every task in this cgroup and below, in ns (cumulative)."""
        if self.hierarchy.version is CgroupVersion.V2:
            return self._cpu_stat().get("usage_usec", 0) * 1000
        path = self._file("cpuacct", "cpuacct.usage")
        text = _read_text(path).strip()
        if not text.isdigit():
            raise CgroupError(path, "unexpected content", value=text)
        return int(text)

    def throttling(self) -> Throttling:
        stat = self._cpu_stat()
        throttled_ns = stat["throttled_time"] if "throttled_time" in stat else stat.get("throttled_usec", 0) * 1000
        return Throttling(stat.get("nr_periods", 0), stat.get("nr_throttled", 0), throttled_ns)

    def procs(self) -> list[int]:
        return [int(p) for p in _read_text(self._file("cpu", "cgroup.procs")).split()]

    # --- lifecycle (tests and benchmarks) ------------------------------------------------------------

    def create(self) -> Cgroup:
        """mkdir this cgroup (and missing parents) in every controller; v1 cpuset inherits cpus/mems."""
        for controller in self.hierarchy.controllers():
            path = self.path(controller)
            if controller == "cpuset":
                self._create_cpuset(path)
            else:
                path.mkdir(parents=True, exist_ok=True)
        return self

    def remove(self) -> None:
        """rmdir this cgroup and its descendants, bottom-up, in every controller; absent is fine."""
        for cg in self.walk_bottom_up():
            for controller in cg.hierarchy.controllers():
                try:
                    cg.path(controller).rmdir()
                except FileNotFoundError:
                    pass
                except OSError as e:
                    raise CgroupError(cg.path(controller), f"cannot remove cgroup: {e.strerror}") from e

    def add_process(self, pid: int) -> None:
        """Move a process into this cgroup (in every controller)."""
        for controller in self.hierarchy.controllers():
            _write_text(f"{self.hierarchy.dir(controller, self.rel)}/cgroup.procs", str(pid))

    # --- internals -----------------------------------------------------------------------------------

    def _file(self, controller: str, name: str) -> str:
        return f"{self.hierarchy.dir(controller, self.rel)}/{name}"

    def _read_texts(self, knob: Knob[T]) -> tuple[str, ...]:
        return tuple(_read_text(self._file(c, f)) for c, f in knob.files[self.hierarchy.version])

    def _decode(self, knob: Knob[T], texts: tuple[str, ...]) -> T:
        try:
            return knob.decode[self.hierarchy.version](texts)
        except (ValueError, IndexError) as e:
            path = self._file(*knob.files[self.hierarchy.version][-1])
            raise CgroupError(path, f"unexpected content ({e})", value=" ".join(texts)) from e

    def _cpu_stat(self) -> dict[str, int]:
        text = _read_text(self._file("cpu", "cpu.stat"))
        out: dict[str, int] = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
        return out

    def _create_cpuset(self, path: Path) -> None:
        if path.is_dir():
            return
        parent = self.parent()
        if parent is not None and not parent.path("cpuset").is_dir():
            parent._create_cpuset(parent.path("cpuset"))
        path.mkdir()
        for name in ("cpuset.cpus", "cpuset.mems"):
            inherited = _read_text(str(path.parent / name)).strip()
            if inherited and not _read_text(str(path / name)).strip():
                _write_text(str(path / name), inherited)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError as e:
        raise _os_error(path, e, None) from e


def _write_text(path: str, text: str) -> None:
    """One write(2) of the whole value, as the kernel expects (O_TRUNC, as runc: harmless on cgroupfs)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as e:
        raise _os_error(path, e, text) from e
    try:
        os.write(fd, text.encode("ascii"))
    except OSError as e:
        raise _os_error(path, e, text) from e
    finally:
        os.close(fd)


def _os_error(path: str, e: OSError, value: str | None) -> CgroupError:
    if e.errno == errno.ENOENT:
        if os.path.isdir(os.path.dirname(path)):
            return CgroupUnsupported(path, "not supported by this kernel (no such file)", value=value)
        return CgroupNotFound(path, "cgroup does not exist", value=value)
    reasons = {
        errno.EINVAL: "kernel rejected the value (out of range, or above the parent's limit)",
        errno.EBUSY: "kernel could not apply the value now (busy; e.g. memory limit below usage)",
        errno.EACCES: "permission denied (the agent must run as root)",
        errno.EPERM: "operation not permitted (the agent must run as root)",
        errno.ENOSPC: "no space (cpuset without cpus or mems)",
    }
    return CgroupError(path, reasons.get(e.errno or 0, e.strerror or str(e)), value=value)
