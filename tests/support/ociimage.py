"""Build a tiny OCI image-layout tarball from Debian's static busybox, without a registry.

The test machines reach no container registry, so the image that the containerd tests run (as
sandbox and as container image) is assembled here with the standard library: one uncompressed
layer holding `/bin/busybox` and the applet symlinks the tests use, a config whose entrypoint
waits for SIGTERM, a manifest, and `index.json` naming the image for `ctr images import`.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import struct
import tarfile
from pathlib import Path
from typing import Final

__all__ = ["APPLETS", "BUSYBOX", "ENTRYPOINT", "build", "is_static_elf"]

BUSYBOX: Final = Path("/bin/busybox")
#: Applets linked in /bin: what the tests run in containers, and a shell.
APPLETS: Final = ("sh", "env", "cat", "ls", "sleep", "echo", "true", "test", "head")
#: Exits on TERM/INT at once, so stopping a container never waits for the kill timeout.
ENTRYPOINT: Final = ("/bin/sh", "-c", "trap 'exit 0' TERM INT; sleep 2147483647 & wait")

_MANIFEST_TYPE: Final = "application/vnd.oci.image.manifest.v1+json"
_CONFIG_TYPE: Final = "application/vnd.oci.image.config.v1+json"
_LAYER_TYPE: Final = "application/vnd.oci.image.layer.v1.tar"
_ARCH: Final = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}
_PT_INTERP: Final = 3


def is_static_elf(path: Path) -> bool:
    """True when `path` is an ELF executable without a program interpreter (statically linked).

    A dynamically linked busybox (Debian's `busybox` package) would not start in an image that
    holds no libc, so the harness checks before building.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if data[:4] != b"\x7fELF":
        return False
    is64, little = data[4] == 2, data[5] == 1
    end = "<" if little else ">"
    if is64:
        (phoff,) = struct.unpack_from(end + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(end + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x2A)
    types = (struct.unpack_from(end + "I", data, phoff + i * phentsize)[0] for i in range(phnum))
    return _PT_INTERP not in types


def _layer(busybox: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mode in (("bin", 0o755), ("dev", 0o755), ("etc", 0o755), ("proc", 0o555), ("sys", 0o555)):
            _add_dir(tar, name, mode)
        _add_dir(tar, "tmp", 0o1777)
        data = busybox.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(link)
    return buf.getvalue()


def _add_dir(tar: tarfile.TarFile, name: str, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest.removeprefix("sha256:"))
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return digest


def _json(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def build(dest: Path, *, name: str, busybox: Path = BUSYBOX) -> Path:
    """Write the image as an OCI image-layout tarball to `dest` and return `dest`.

    `name` becomes the `io.containerd.image.name` annotation, i.e. the image reference that CRI
    sees after `ctr -n k8s.io images import`. Deterministic: equal inputs give equal bytes.
    """
    arch = _ARCH.get(platform.machine(), platform.machine())
    layer = _layer(busybox)
    layer_digest = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = _json(
        {
            "architecture": arch,
            "os": "linux",
            "config": {"Entrypoint": list(ENTRYPOINT), "Env": ["PATH=/bin"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
    )
    with tarfile.open(dest, mode="w", format=tarfile.PAX_FORMAT) as tar:
        layout = _json({"imageLayoutVersion": "1.0.0"})
        info = tarfile.TarInfo("oci-layout")
        info.size = len(layout)
        tar.addfile(info, io.BytesIO(layout))
        _blob(tar, layer)
        config_digest = _blob(tar, config)
        manifest = _json(
            {
                "schemaVersion": 2,
                "mediaType": _MANIFEST_TYPE,
                "config": {"mediaType": _CONFIG_TYPE, "digest": config_digest, "size": len(config)},
                "layers": [{"mediaType": _LAYER_TYPE, "digest": layer_digest, "size": len(layer)}],
            }
        )
        manifest_digest = _blob(tar, manifest)
        index = _json(
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        "mediaType": _MANIFEST_TYPE,
                        "digest": manifest_digest,
                        "size": len(manifest),
                        "platform": {"architecture": arch, "os": "linux"},
                        "annotations": {"io.containerd.image.name": name},
                    }
                ],
            }
        )
        info = tarfile.TarInfo("index.json")
        info.size = len(index)
        tar.addfile(info, io.BytesIO(index))
    return dest
