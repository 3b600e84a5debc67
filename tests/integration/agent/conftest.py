"""The agent unit tests' fixtures (fixture node, sysfs tree, NVML environments) for integration tests."""

from tests.unit.agent.conftest import fake_nvml, nvml, nvml_env, profile, sysfs

__all__ = ["fake_nvml", "nvml", "nvml_env", "profile", "sysfs"]
