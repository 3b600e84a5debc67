"""Start Tessera's components as child processes: `tessera up`, the e2e and integration tests and the
benchmarks run each component exactly as a user would (`tessera apiserver`, `tessera agent`, …).

One module per component: `apiserver.EmbeddedAPIServer`, `agent.AgentProcess`,
`controller.ControllerProcess`, `scheduler.SchedulerProcess`, `runtimeproxy.RuntimeProxyProcess`;
`kube.process.ServingProcess` is what they share.
"""
