"""Fixtures of the agent's integration tests.

- The agent unit tests' fixtures (fixture node, sysfs tree, NVML environments).
- One real `tessera apiserver` process (CRDs installed) for the tests that talk to an API server,
  and clients for it. Tests use unique node names; tests that kill it start it again.
"""

from tests.support import apiservers
from tests.support.nvml import fake_nvml, nvml, nvml_env, profile, sysfs

__all__ = ["apiserver", "client", "fake_nvml", "nvml", "nvml_env", "profile", "sysfs"]


apiserver = apiservers.apiserver_fixture("session")


client = apiservers.client_fixture()
