"""The fixture GPU node and the NVML environments agent tests run in, for the unit and the
integration tests alike (each conftest imports the fixtures it offers).

`nvml_env` runs a test twice: on FakeNVML over the fixture node's sysfs tree (always) and on
real `pynvml` over `/sys` where an NVIDIA GPU and driver are present (skipped with the reason
elsewhere). Tests that inject faults skip the real run through `env.require_fake()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pynvml
import pytest

from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.nvmllib import NVML, NVMLLibrary
from agent.discovery.simulated import Profile, load_profile
from tests.support.sysfs_tree import SysfsTree

#: The fixture node: 8 GPUs and their NICs (tests/unit/agent/fixtures).
FIXTURE_PROFILE = Path(__file__).parents[1] / "unit" / "agent" / "fixtures" / "gpu-node.yaml"


NODE = "gpu-node-1"


@pytest.fixture
def profile() -> Profile:
    return load_profile(str(FIXTURE_PROFILE))


@pytest.fixture
def sysfs(tmp_path: Path, profile: Profile) -> SysfsTree:
    return SysfsTree(tmp_path / "sys").write(profile)


@pytest.fixture
def fake_nvml(profile: Profile) -> FakeNVML:
    """The fixture node's 8 GPUs, not yet initialised (as pynvml before `nvmlInit`)."""
    return profile.fake_nvml(NODE)


@dataclass
class NVMLEnv:
    lib: NVMLLibrary
    sysfs_root: Path
    fake: FakeNVML | None
    profile: Profile | None

    def require_fake(self) -> FakeNVML:
        if self.fake is None:
            pytest.skip("needs fault injection, which only the fake NVML offers")
        return self.fake


def real_nvml_or_skip() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        pytest.skip(f"no NVIDIA GPU and driver on this machine (nvmlInit: {e})")
    pynvml.nvmlShutdown()


@pytest.fixture(params=["fake", "real"])
def nvml_env(request: pytest.FixtureRequest, tmp_path: Path, profile: Profile) -> NVMLEnv:
    if request.param == "fake":
        tree = SysfsTree(tmp_path / "sys").write(profile)
        fake = profile.fake_nvml(NODE)
        return NVMLEnv(fake, tree.root, fake, profile)
    real_nvml_or_skip()
    return NVMLEnv(pynvml, Path("/sys"), None, None)


@pytest.fixture
def nvml(nvml_env: NVMLEnv) -> Iterator[NVML]:
    """`nvml_env`'s library, initialised for the test and shut down after it."""
    nvml = NVML(nvml_env.lib)
    nvml.init()
    yield nvml
    nvml.shutdown()
