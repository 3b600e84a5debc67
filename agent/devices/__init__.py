"""The node's devices as the agent reports them: discovery, health and metrics run together
(`node.NodeDevices`), the pure Device CR builder (`cr.build_device`), the reporter that writes it
(`reporter.DeviceReporter`) and fault injection for simulated GPUs (`faults.SimulatedFaults`)."""
