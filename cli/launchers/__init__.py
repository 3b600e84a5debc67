"""Start Tessera's components as child processes: `tessera up`, the e2e and integration tests and the
benchmarks run each component exactly as a user would (`tessera apiserver`, `tessera agent`, …).

One module per component: `apiserver.EmbeddedAPIServer`, `agent.AgentProcess`,
`controller.ControllerProcess`, `descheduler.DeschedulerProcess`,
`kubecontrollers.KubeControllersProcess`, `dashboard.DashboardProcess`,
`scheduler.SchedulerProcess`, `runtimeproxy.RuntimeProxyProcess`. `kube.process.ServingProcess`
is what they share; `base.KubeComponentProcess` adds what those that talk to an API server share
(the command line with `--kubeconfig`, a free loopback port and its address file, `--v`; the
start; the context manager), so each launcher keeps only its own flags and helpers.
"""
