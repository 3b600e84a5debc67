"""Test support shared by integration and e2e tests (real parts, not fakes)."""
